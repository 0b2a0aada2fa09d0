#!/usr/bin/env python3
"""Fake planner for `forge draft`: keeps each try's prompt, then answers with a plan.

usage: planner.py [--keep DIR] [--stdout] [--touch FILE] [--usage] [--say TEXT] ANSWER...
Try N answers with the Nth ANSWER file (the last one after that): written to
$FORGE_PLAN_FILE, or with --stdout printed in a ```toml block. With --keep, each
try's prompt is copied to DIR/prompt-N.md. --touch writes FILE in the checkout (a
change forge must discard); --usage prints a Claude-like result with a cost; --say
prints TEXT and exits 1 without answering (an outage, say).
"""

import json
import os
import shutil
import sys
from pathlib import Path

args = sys.argv[1:]
stdout = "--stdout" in args
usage = "--usage" in args
touch = say = None
keep = None
answers = []
while args:
    arg = args.pop(0)
    if arg == "--touch":
        touch = args.pop(0)
    elif arg == "--keep":
        keep = Path(args.pop(0))
    elif arg == "--say":
        say = args.pop(0)
    elif not arg.startswith("--"):
        answers.append(arg)
n = int(os.environ["FORGE_ATTEMPT"])
if keep is not None:
    keep.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(os.environ["FORGE_PROMPT_FILE"], keep / f"prompt-{n}.md")
if say is not None:
    print(say)
    sys.exit(1)
if touch:
    (Path.cwd() / touch).write_text("a planner's stray edit\n")
plan = Path(answers[min(n, len(answers)) - 1]).read_text()
if stdout:
    print(f"Here is the plan.\n\n```toml\n{plan}```")
else:
    Path(os.environ["FORGE_PLAN_FILE"]).write_text(plan)
    print("wrote the plan")
if usage:
    print(
        json.dumps(
            {
                "type": "result",
                "is_error": False,
                "total_cost_usd": 0.0125,
                "usage": {"input_tokens": 900, "output_tokens": 120},
            }
        )
    )
