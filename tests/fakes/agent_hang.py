#!/usr/bin/env python3
"""Fake agent: ignore SIGTERM, start a grandchild that ignores it too, write
"<own pid> <grandchild pid>" to PIDFILE (atomically, once both ignore TERM),
then sleep forever. Only SIGKILL ends them.

usage: agent_hang.py PIDFILE
"""

import os
import signal
import subprocess
import sys
import time

signal.signal(signal.SIGTERM, signal.SIG_IGN)
if sys.argv[1:2] == ["--child"]:
    print("ready", flush=True)
    while True:
        time.sleep(3600)

pidfile = sys.argv[1]
child = subprocess.Popen(
    [sys.executable, os.path.abspath(__file__), "--child"], stdout=subprocess.PIPE, text=True
)
assert child.stdout is not None
child.stdout.readline()  # the child ignores TERM from here on
tmp = f"{pidfile}.tmp"
with open(tmp, "w") as fh:
    fh.write(f"{os.getpid()} {child.pid}\n")
os.replace(tmp, pidfile)
print(f"hanging: {os.getpid()} and {child.pid}", flush=True)
while True:
    time.sleep(3600)
