"""The documents stay true: docs/reference/ and docs/performance.md are what
`tools/reference.py` writes from the checkers' tables and bench/RESULTS.md, every
key a checker accepts is described, the README stays a front door (at most 200
lines), and every link between the documents leads to a file that exists."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOOL = ROOT / "tools" / "reference.py"
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def _tool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(TOOL), *args], cwd=ROOT, capture_output=True, text=True, timeout=60
    )


def test_the_reference_is_generated_from_the_checkers_and_up_to_date() -> None:
    cp = _tool("--check")
    assert cp.returncode == 0, cp.stdout + cp.stderr


def test_a_key_without_a_description_fails_the_check(tmp_path: Path) -> None:
    """The check is not a formality: an accepted key nobody described is named."""
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import runpy, sys\n"
        f"sys.path.insert(0, {str(ROOT / 'tools')!r})\n"
        "import reference_text\n"
        "del reference_text.KEYS['plan']['max_parallel']\n"
        f"sys.argv = [{str(TOOL)!r}, '--check']\n"
        f"runpy.run_path({str(TOOL)!r}, run_name='__main__')\n"
    )
    cp = subprocess.run(
        [sys.executable, str(probe)], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert cp.returncode == 1
    assert "plan max_parallel: accepted but not described" in cp.stdout


def test_the_readme_is_a_front_door() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 200, f"README.md has {len(lines)} lines: move the depth to docs/"


def test_every_link_between_documents_leads_somewhere() -> None:
    broken = []
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        for target in LINK.findall(doc.read_text(encoding="utf-8")):
            if "://" in target:
                continue
            if not (doc.parent / target).exists():
                broken.append(f"{doc.relative_to(ROOT)} -> {target}")
    assert not broken, "links to nothing:\n" + "\n".join(broken)
