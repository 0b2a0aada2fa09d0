"""A verification that ignores TERM and leaves grandchildren that ignore it too.

Usage: stubborn.py PIDFILE. Writes every pid it started (itself first) to PIDFILE
once all are running, then waits forever.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

IGNORE_TERM = (
    "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    "while True: time.sleep(60)\n"
)


def main() -> None:
    pidfile = Path(sys.argv[1])
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    kids = [subprocess.Popen([sys.executable, "-c", IGNORE_TERM]) for _ in range(2)]
    # A grandchild whose parent exits: orphaned, it re-parents away from us. It
    # must not hold the pipe, or reading the pid would wait for it forever.
    middle = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import subprocess, sys\n"
            f"p = subprocess.Popen([sys.executable, '-c', {IGNORE_TERM!r}], stdout=subprocess.DEVNULL)\n"
            "print(p.pid)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    orphan = int(middle.communicate()[0].strip())
    pids = [os.getpid(), *(k.pid for k in kids), orphan]
    tmp = pidfile.with_suffix(".tmp")
    tmp.write_text("\n".join(map(str, pids)) + "\n")
    tmp.replace(pidfile)
    while True:
        time.sleep(60)


if __name__ == "__main__":
    main()
