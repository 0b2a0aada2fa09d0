"""A verifier that fails its first N runs, counted in a file outside the checkout.

Usage: verify_flaky.py COUNTER N
"""

from __future__ import annotations

import sys
from pathlib import Path

counter = Path(sys.argv[1])
fails = int(sys.argv[2])
seen = int(counter.read_text()) if counter.exists() else 0
counter.write_text(str(seen + 1))
if seen < fails:
    print(f"flaky: failing run {seen + 1}")
    sys.exit(1)
print(f"flaky: passing run {seen + 1}")
