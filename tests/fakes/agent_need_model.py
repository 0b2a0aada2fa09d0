#!/usr/bin/env python3
"""Fake agent: edits FILE and exits 0 only when $FORGE_MODEL is MODEL, else fails.

usage: agent_need_model.py MODEL [FILE]
"""

import os
import sys
from pathlib import Path

want = sys.argv[1]
name = sys.argv[2] if len(sys.argv) > 2 else "agent-edit.txt"
got = os.environ.get("FORGE_MODEL", "")
if got != want:
    print(f"model {got or '(none)'} is too weak for this task (needs {want})")
    sys.exit(1)
with (Path.cwd() / name).open("a") as fh:
    fh.write(f"done by model {got} attempt {os.environ.get('FORGE_ATTEMPT', '?')}\n")
print(f"edited {name} with model {got}")
