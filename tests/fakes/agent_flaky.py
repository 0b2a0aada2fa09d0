#!/usr/bin/env python3
"""Fake agent: fail the first N runs (counted in COUNTER, an absolute path
outside the worktree), then append to FILE in the cwd and exit 0.

usage: agent_flaky.py N COUNTER [FILE]
"""

import os
import sys
from pathlib import Path

fails = int(sys.argv[1])
counter = Path(sys.argv[2])
name = sys.argv[3] if len(sys.argv) > 3 else "agent-edit.txt"
runs = int(counter.read_text()) if counter.exists() else 0
counter.write_text(str(runs + 1))
if runs < fails:
    print(f"flaky agent: failing run {runs + 1} of the first {fails}")
    sys.exit(1)
with (Path.cwd() / name).open("a") as fh:
    fh.write(
        f"flaky agent succeeded on run {runs + 1}, attempt {os.environ.get('FORGE_ATTEMPT', '?')}\n"
    )
print(f"edited {name} on run {runs + 1}")
