#!/usr/bin/env python3
"""Fake agent: append a line to a file in the cwd (the worktree), exit 0.

usage: agent_edit.py [FILE [TEXT]] [--overwrite] [--usage] [--ran=MODEL]
FILE defaults to $FORGE_FAKE_FILE or "agent-edit.txt"; TEXT to $FORGE_FAKE_TEXT
or "edit by <task> attempt <n>". --overwrite writes TEXT as the whole file (the
same diff every attempt). --usage prints a Claude-style JSON result with cost;
--ran=MODEL names MODEL (and a small haiku helper) in its `modelUsage`.
"""

import json
import os
import sys
from pathlib import Path

args = [a for a in sys.argv[1:] if not a.startswith("--")]
name = args[0] if args else os.environ.get("FORGE_FAKE_FILE", "agent-edit.txt")
default = (
    f"edit by {os.environ.get('FORGE_TASK', '?')} attempt {os.environ.get('FORGE_ATTEMPT', '?')}"
)
text = args[1] if len(args) > 1 else os.environ.get("FORGE_FAKE_TEXT", default)
path = Path.cwd() / name
path.parent.mkdir(parents=True, exist_ok=True)
if "--overwrite" in sys.argv:
    path.write_text(text + "\n")
else:
    with path.open("a") as fh:
        fh.write(text + "\n")
print(f"edited {name}")
ran = [a.partition("=")[2] for a in sys.argv[1:] if a.startswith("--ran=")]
if "--usage" in sys.argv or ran:
    result = {
        "type": "result",
        "subtype": "success",
        "is_error": False,
        "result": f"edited {name}",
        "total_cost_usd": 0.0123,
        "usage": {"input_tokens": 100, "output_tokens": 20},
    }
    if ran:
        result["modelUsage"] = {ran[0]: {"costUSD": 0.012}, "claude-haiku-4-5": {"costUSD": 0.0003}}
    print(json.dumps(result))
