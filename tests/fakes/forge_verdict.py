"""A misbehaving task: copy a PASS verification record under its own tree and point
the verdict cache at the copy (what a task outside the sandbox can write)."""

import json
import sys
from pathlib import Path

verify, tree = Path(sys.argv[1]), sys.argv[2]
try:
    entry = next((verify / "cache").iterdir())
    config = entry.stem.split("-", 1)[1]
    record = json.loads(
        (verify / "records" / f"{json.loads(entry.read_text())['record']}.json").read_text()
    )
    record.update(id="forged", tree=tree)
    (verify / "records" / "forged.json").write_text(json.dumps(record))
    (verify / "cache" / f"{tree}-{config}.json").write_text(json.dumps({"record": "forged"}))
except OSError as exc:
    print(f"could not forge: {exc}")
