#!/usr/bin/env python3
"""Fake agent: edits FILE and exits 0 only when $FORGE_EFFORT is EFFORT, else fails.

usage: agent_need_effort.py EFFORT [FILE]
"""

import os
import sys
from pathlib import Path

want = sys.argv[1]
name = sys.argv[2] if len(sys.argv) > 2 else "agent-edit.txt"
got = os.environ.get("FORGE_EFFORT", "")
if got != want:
    print(f"effort {got or '(none)'} is too low for this task (needs {want})")
    sys.exit(1)
with (Path.cwd() / name).open("a") as fh:
    fh.write(f"done at effort {got} attempt {os.environ.get('FORGE_ATTEMPT', '?')}\n")
print(f"edited {name} at effort {got}")
