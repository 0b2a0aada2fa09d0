"""A task command that starts its work only once `n` tasks are running: it leaves a
marker in GATE and waits (60 s at most) until GATE holds `n`, then appends a line
to OUT.

    python together.py GATE N OUT
"""

import sys
import time
from pathlib import Path

gate, n, out = Path(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3])
gate.mkdir(parents=True, exist_ok=True)
(gate / out.name).touch()
end = time.monotonic() + 60
while len(list(gate.iterdir())) < n and time.monotonic() < end:
    time.sleep(0.01)
with out.open("a") as fh:
    fh.write(f"{out.name}\n")
