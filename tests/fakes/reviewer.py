#!/usr/bin/env python3
"""Fake reviewer: approve when a file of the change holds a text, else reject.

usage: reviewer.py FILE TEXT [--findings F] [--file PATH] [--exit-code] [--cost USD]
                   [--copy-prompt DEST]
Approves when FILE (in the cwd, the task's worktree) contains TEXT. The verdict
goes as JSON to PATH (`{review_file}`) or $FORGE_REVIEW_FILE; with --exit-code
no file is written: the findings are printed and the exit is 1 to reject, 0 to
approve. --cost prints a Claude-style result with that cost. --copy-prompt
keeps the review's prompt file.
"""

import json
import os
import shutil
import sys
from pathlib import Path


def opt(name: str, default: str | None = None) -> str | None:
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


name, text = sys.argv[1:3]
target = Path.cwd() / name
approve = target.is_file() and text in target.read_text()
findings = opt("--findings", "the change is not done") or ""
if opt("--copy-prompt"):
    shutil.copyfile(os.environ["FORGE_PROMPT_FILE"], str(opt("--copy-prompt")))
if opt("--cost"):
    cost = float(opt("--cost") or 0)
    print(
        json.dumps(
            {
                "type": "result",
                "is_error": False,
                "result": "reviewed",
                "total_cost_usd": cost,
                "usage": {"input_tokens": 7, "output_tokens": 3},
            }
        )
    )
if "--exit-code" in sys.argv:
    if not approve:
        print(findings)
    sys.exit(0 if approve else 1)
verdict = {"verdict": "approve"} if approve else {"verdict": "reject", "findings": findings}
Path(opt("--file") or os.environ["FORGE_REVIEW_FILE"]).write_text(json.dumps(verdict))
