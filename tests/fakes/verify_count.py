"""A verifier that counts its runs in a file outside the checkout and fails when
given files are in the checkout: any one of them (--fail-if), or all of a group
together (--fail-if-all A,B).

Usage: verify_count.py COUNTER [--fail-if PATH]... [--fail-if-all A,B]...
"""

from __future__ import annotations

import fcntl
import sys
from pathlib import Path

args = sys.argv[1:]
counter = Path(args.pop(0))
# Verifications may run at once (verify_parallel): count under a lock.
with open(counter.with_name(counter.name + ".lock"), "w") as lock:
    fcntl.flock(lock, fcntl.LOCK_EX)
    seen = int(counter.read_text() or 0) if counter.exists() else 0
    counter.write_text(str(seen + 1))
while args:
    flag, value = args.pop(0), args.pop(0)
    names = value.split(",") if flag == "--fail-if-all" else [value]
    if all(Path(name).exists() for name in names):
        print(f"verify: broken by {' and '.join(names)} (run {seen + 1})")
        sys.exit(1)
print(f"verify: ok (run {seen + 1})")
