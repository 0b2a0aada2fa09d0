"""A verifier for speculation: appends one line per run to a log outside the
checkout (its checkout's key, then the task files present), takes SECONDS, and
fails when a given file is present. Lines are appended whole, so verifications
running at once do not garble each other.

Usage: verify_spec.py LOG SECONDS [FAIL_IF]
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

log, seconds = Path(sys.argv[1]), float(sys.argv[2])
fail_if = sys.argv[3] if len(sys.argv) > 3 else None
key = os.environ["FORGE_PROC_TAG"].rsplit(":", 2)[1]  # forge-verify:<repo>:<key>:<lane>
files = sorted(p.name for p in Path.cwd().glob("*.txt"))
fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
os.write(fd, f"{key} {' '.join(files)}\n".encode())
os.close(fd)
time.sleep(seconds)  # the verification's own duration, not a wait for an event
if fail_if is not None and Path(fail_if).exists():
    print(f"verify: broken by {fail_if}")
    sys.exit(1)
print("verify: ok")
