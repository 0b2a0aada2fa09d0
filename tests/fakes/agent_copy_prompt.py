#!/usr/bin/env python3
"""Fake agent: copy $FORGE_PROMPT_FILE to DEST, then append to FILE in the cwd.

usage: agent_copy_prompt.py [DEST [FILE]]
DEST (or $FORGE_FAKE_PROMPT_COPY) may contain {attempt}, replaced by
$FORGE_ATTEMPT, so each attempt's prompt is kept.
"""

import os
import shutil
import sys
from pathlib import Path

dest = sys.argv[1] if len(sys.argv) > 1 else os.environ["FORGE_FAKE_PROMPT_COPY"]
attempt = os.environ.get("FORGE_ATTEMPT", "0")
dest = dest.replace("{attempt}", attempt)
Path(dest).parent.mkdir(parents=True, exist_ok=True)
shutil.copyfile(os.environ["FORGE_PROMPT_FILE"], dest)
name = sys.argv[2] if len(sys.argv) > 2 else "agent-edit.txt"
with (Path.cwd() / name).open("a") as fh:
    fh.write(f"attempt {attempt}\n")
print(f"copied the prompt to {dest}; edited {name}")
