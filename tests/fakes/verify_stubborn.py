"""A verifier that ignores TERM and leaves grandchildren (which ignore it too).

Usage: verify_stubborn.py PIDFILE [--escape]
Writes every pid it started (itself first) to PIDFILE once all are running, then
waits forever. With --escape one grandchild leaves the group with setsid.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

IGNORE_TERM = "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nwhile True: time.sleep(60)\n"


def main() -> None:
    pidfile = Path(sys.argv[1])
    escape = "--escape" in sys.argv
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    kids = [
        subprocess.Popen([sys.executable, "-c", IGNORE_TERM], start_new_session=(escape and i == 1))
        for i in range(2)
    ]
    # A grandchild of a child: the child exits, so the grandchild is orphaned.
    orphan = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import subprocess,sys; p=subprocess.Popen([sys.executable,'-c',{IGNORE_TERM!r}],stdout=subprocess.DEVNULL); print(p.pid)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    orphan_pid = int(orphan.communicate()[0].strip())
    pids = [os.getpid(), *(k.pid for k in kids), orphan_pid]
    tmp = pidfile.with_suffix(".tmp")
    tmp.write_text("\n".join(map(str, pids)) + "\n")
    tmp.replace(pidfile)  # whole or nothing: the test waits for this file
    while True:
        time.sleep(60)


if __name__ == "__main__":
    main()
