#!/usr/bin/env python3
"""Fake CLI: print a recorded output and exit as the real CLI did.

usage: agent_replay.py FIXTURE [--exit N] [--hang] [--touch PATH]
FIXTURE is a file name under tests/fixtures/agents/. --hang keeps running after
printing (a CLI that waits out an outage until it is killed). --touch creates
PATH (relative to the cwd) first, as a CLI's cache would.
"""

import sys
import time
from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "agents"
args = sys.argv[1:]
if "--touch" in args:
    target = Path.cwd() / args[args.index("--touch") + 1]
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("cache\n")
sys.stdout.write((FIXTURES / args[0]).read_text())
sys.stdout.flush()
while "--hang" in args:
    time.sleep(0.05)
sys.exit(int(args[args.index("--exit") + 1]) if "--exit" in args else 1)
