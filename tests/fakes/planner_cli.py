#!/usr/bin/env python3
"""A fake Claude Code, Codex, aider or Gemini CLI answering as a planner.

usage: planner_cli.py NAME RECORD PLAN [CLI ARGS...]
Records its CLI arguments and the prompt it was given (stdin, or aider's
--message-file) as JSON in RECORD, then prints PLAN's text in a ```toml block,
in that CLI's own output format, with its usage.
"""

import json
import sys
from pathlib import Path

name, record, plan_path, *argv = sys.argv[1:]
if name == "aider":
    prompt = Path(argv[argv.index("--message-file") + 1]).read_text()
else:
    prompt = sys.stdin.read()
Path(record).write_text(json.dumps({"argv": argv, "prompt": prompt}))
text = f"Here is the plan.\n\n```toml\n{Path(plan_path).read_text()}```\n"

if name == "claude":  # stream-json: init, the assistant's text, then the result
    for event in (
        {"type": "system", "subtype": "init", "session_id": "s1", "model": "claude-sonnet-4-5"},
        {"type": "assistant", "message": {"content": [{"type": "text", "text": text}]}},
        {
            "type": "result",
            "subtype": "success",
            "is_error": False,
            "result": text,
            "total_cost_usd": 0.02,
            "usage": {"input_tokens": 1500, "output_tokens": 300},
        },
    ):
        print(json.dumps(event))
elif name == "codex":  # exec --json: JSONL events, usage on turn.completed
    for event in (
        {"type": "thread.started", "thread_id": "t1"},
        {"type": "turn.started"},
        {"type": "item.completed", "item": {"id": "i1", "type": "agent_message", "text": text}},
        {"type": "turn.completed", "usage": {"input_tokens": 2000, "output_tokens": 400}},
    ):
        print(json.dumps(event))
elif name == "gemini":  # -o json: one pretty-printed object
    tokens = {"prompt": 1200, "candidates": 250, "total": 1450}
    print(
        json.dumps(
            {
                "session_id": "g1",
                "response": text,
                "stats": {"models": {"gemini-2.5-flash": {"tokens": tokens}}},
            },
            indent=2,
        )
    )
else:  # aider: plain text, then its usage line
    print(text)
    print("Tokens: 1.1k sent, 210 received. Cost: $0.0042 message, $0.0042 session.")
