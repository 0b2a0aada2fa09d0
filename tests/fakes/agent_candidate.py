#!/usr/bin/env python3
"""Fake agent for best-of-N: what it does is keyed by the model it is asked for.

usage: agent_candidate.py MODEL FILE
  fast, small    write a short FILE and exit 0 (once every file named in
                 $FORGE_FAKE_WAIT_FOR, separated by `:`, exists)
  big            write a long FILE (ten lines) and exit 0
  late           once $FORGE_FAKE_DIR/culprit exists, write "late" to FILE
  bad            write "bad" to FILE (a check `! grep -q bad FILE` fails it)
  slow           write "slow" to FILE (uncommitted work), start a grandchild, both
                 ignoring TERM, write $FORGE_FAKE_DIR/slow.pids, then wait for
                 $FORGE_FAKE_DIR/release (never comes: it is stopped)
  empty          change nothing
Each run appends its model to $FORGE_FAKE_DIR/ran (when set), and `+MODEL` as it
starts and `-MODEL` as it ends to $FORGE_FAKE_DIR/spans. A `--usage` flag
prints a Claude-style result costing $0.01 (big: $0.001).
"""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

model, name = sys.argv[1], sys.argv[2]
if model == "--child":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    print("ready", flush=True)
    while True:
        time.sleep(3600)
shared = os.environ.get("FORGE_FAKE_DIR")
if shared:
    with open(Path(shared) / "ran", "a") as fh:
        fh.write(model + "\n")
    with open(Path(shared) / "spans", "a") as fh:
        fh.write(f"+{model}\n")
path = Path.cwd() / name
if model in ("fast", "small"):
    for waited in filter(None, os.environ.get("FORGE_FAKE_WAIT_FOR", "").split(os.pathsep)):
        while not Path(waited).exists():
            time.sleep(0.02)  # the others are where the test wants them before this passes
    path.write_text(f"{model}\n")
elif model == "big":
    path.write_text("".join(f"line {i}\n" for i in range(10)))
elif model == "late":
    while not (Path(shared or ".") / "culprit").exists():
        time.sleep(0.02)  # until the verification has failed another candidate
    path.write_text("late\n")
elif model == "bad":
    path.write_text("bad\n")
elif model == "slow":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    path.write_text("slow, unfinished\n")
    child = subprocess.Popen(
        [sys.executable, os.path.abspath(__file__), "--child", "-"],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    child.stdout.readline()
    assert shared
    tmp = Path(shared) / "slow.pids.tmp"
    tmp.write_text(f"{os.getpid()} {child.pid}\n")
    os.replace(tmp, Path(shared) / "slow.pids")
    while not (Path(shared) / "release").exists():
        time.sleep(0.05)
if shared:
    with open(Path(shared) / "spans", "a") as fh:
        fh.write(f"-{model}\n")
print(f"{model}: done")
if "--usage" in sys.argv:
    usd = 0.001 if model == "big" else 0.01
    result = {"type": "result", "subtype": "success", "is_error": False, "result": "done"}
    print(
        json.dumps(
            {**result, "total_cost_usd": usd, "usage": {"input_tokens": 10, "output_tokens": 5}}
        )
    )
