#!/bin/sh
# A lane for the supersede test: records its pid, notes which earlier lanes are still
# alive when it starts, then waits (ignoring TERM) until it is killed.
# Usage: verify_pids.sh DIR
dir="$1"
alive=""
for f in "$dir"/*.pid; do
    [ -e "$f" ] || continue
    p=$(cat "$f")
    if kill -0 "$p" 2>/dev/null && ! grep -q '^State:.*Z' "/proc/$p/status" 2>/dev/null; then
        alive="$alive $p"
    fi
done
echo "$alive" > "$dir/$$.alive"
trap '' TERM
echo $$ > "$dir/$$.tmp" && mv "$dir/$$.tmp" "$dir/$$.pid"
while :; do sleep 1; done
