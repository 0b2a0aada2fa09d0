#!/usr/bin/env python3
"""Fake best-of-N judge: name WINNER in $FORGE_JUDGE_FILE, after checking that the
prompt file holds every candidate's diff; print a Claude-style result costing $0.05.
With FORGE_FAKE_DIR set, write its agent state folder ($FORGE_STATE_DIR) to
judge-state there.

usage: judge.py PROMPT_FILE WINNER
"""

import json
import os
import sys
from pathlib import Path

prompt = Path(sys.argv[1]).read_text()
if prompt.count("## Candidate ") < 2 or "```diff" not in prompt:
    sys.exit("the prompt holds no candidates' diffs")
if "FORGE_FAKE_DIR" in os.environ:
    Path(os.environ["FORGE_FAKE_DIR"], "judge-state").write_text(os.environ["FORGE_STATE_DIR"])
answer = {"winner": sys.argv[2], "why": "it says more"}
Path(os.environ["FORGE_JUDGE_FILE"]).write_text(json.dumps(answer))
print(
    json.dumps(
        {
            "type": "result",
            "subtype": "success",
            "is_error": False,
            "result": "ok",
            "total_cost_usd": 0.05,
            "usage": {"input_tokens": 1, "output_tokens": 1},
        }
    )
)
