#!/usr/bin/env python3
"""Fake CLI: show the config it sees, as a real CLI would read it.

usage: agent_show_config.py VAR RELPATH OUT
Reads $VAR/RELPATH (the CLI's config file under its config folder) and writes
"VAR=<value>" and the file's text to OUT in the cwd. A missing file is what a
CLI without its provider settings does: fail to connect, exit 1.
"""

import json
import os
import sys
from pathlib import Path

var, rel, out = sys.argv[1:4]
folder = os.environ.get(var, "")
config = Path(folder) / rel
if not folder or not config.is_file():
    result = "API Error: Unable to connect to API (FailedToOpenSocket)"
    print(json.dumps({"type": "result", "is_error": True, "result": f"{result}; no {config}"}))
    sys.exit(1)
(Path.cwd() / out).write_text(f"{var}={folder}\n{config.read_text()}")
print(f"read {config}")
