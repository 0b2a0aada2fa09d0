"""A setup that makes what `python -m venv .venv && .venv/bin/pip install ...` makes
where it matters: a virtualenv and a console script whose shebang names the
virtualenv's python by its absolute path. The script (`.venv/bin/where`) prints the
environment it runs in and fails unless that is the folder it is run from: a check
that would run another folder's environment fails by name."""

from __future__ import annotations

import os
import sys
import venv
from pathlib import Path

SCRIPT = """#!{python}
import os, sys
here = os.path.join(os.getcwd(), ".venv")
print("environment", sys.prefix, "in", os.getcwd())
sys.exit(0 if os.path.samefile(sys.prefix, here) else "another folder's environment: " + sys.prefix)
"""

root = Path(os.getcwd()) / ".venv"
venv.create(root, with_pip=False)
tool = root / "bin" / "where"
tool.write_text(SCRIPT.format(python=root / "bin" / "python"))
tool.chmod(0o755)
sys.exit(0)
