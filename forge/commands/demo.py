"""`forge demo`: a throwaway repository, a small Python project with tests, and a
plan of shell tasks run end to end with verification. No AI, no network."""

from __future__ import annotations

import shlex
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from forge.base import proc
from forge.errors import ExitCode

if TYPE_CHECKING:
    from forge.base.settings import Settings

CALC = '''"""A tiny calculator."""


def add(a, b):
    return a + b
'''

TEST_CALC = """import unittest

from calc import add


class AddTest(unittest.TestCase):
    def test_add(self):
        self.assertEqual(add(2, 3), 5)
"""

README = "# calc\n\nA tiny calculator.\n"


# Each task is a shell command that edits the project, as an agent would. `docs`
# and `usage` both write README.md, so forge defers one of them to a later wave
# and never runs them at once.
def plan_data(python: str) -> dict[str, object]:
    py = shlex.quote(python)
    test_mul = (
        "import unittest\n\nfrom calc import mul\n\n\n"
        "class MulTest(unittest.TestCase):\n"
        "    def test_mul(self):\n        self.assertEqual(mul(4, 5), 20)\n"
    )
    return {
        "name": "demo",
        "max_parallel": 3,
        "verify": f"{py} -m unittest discover -q",
        "verify_reruns": 1,
        "task": [
            {
                "id": "mul",
                "title": "Add mul()",
                "run": "printf '\\n\\ndef mul(a, b):\\n    return a * b\\n' >> calc.py",
                "files": ["calc.py"],
            },
            {
                "id": "test-mul",
                "title": "Test mul()",
                "run": f"printf %s {shlex.quote(test_mul)} > test_mul.py",
                "files": ["test_mul.py"],
                "deps": ["mul"],
                "check": f"{py} -m unittest -q test_mul",
            },
            {
                "id": "changelog",
                "title": "Start a changelog",
                "run": "printf '# Changelog\\n\\n- add mul()\\n' > CHANGELOG.md",
                "files": ["CHANGELOG.md"],
            },
            {
                "id": "docs",
                "title": "Document add()",
                "run": "printf '\\n## add(a, b)\\n\\nReturns a + b.\\n' >> README.md",
                "files": ["README.md"],
            },
            {
                "id": "usage",
                "title": "Document mul()",
                "run": "printf '\\n## mul(a, b)\\n\\nReturns a * b.\\n' >> README.md",
                "files": ["README.md"],
            },
        ],
    }


def create(path: Path | None) -> tuple[Path, Path]:
    """Make the demo repository; returns (repository, plan file)."""
    root = Path(tempfile.mkdtemp(prefix="forge-demo-")) if path is None else path.resolve()
    repo = root / "calc"
    if repo.exists() and any(repo.iterdir()):
        from forge.errors import ForgeError

        raise ForgeError(f"{repo} already exists; give `forge demo` an empty folder")
    repo.mkdir(parents=True, exist_ok=True)
    (repo / "calc.py").write_text(CALC)
    (repo / "test_calc.py").write_text(TEST_CALC)
    (repo / "README.md").write_text(README)
    (repo / ".gitignore").write_text("__pycache__/\n")
    env = {
        "GIT_AUTHOR_NAME": "forge demo",
        "GIT_AUTHOR_EMAIL": "demo@forge.invalid",
        "GIT_COMMITTER_NAME": "forge demo",
        "GIT_COMMITTER_EMAIL": "demo@forge.invalid",
    }
    for argv in (
        ["git", "init", "-q", "-b", "main"],
        ["git", "add", "-A"],
        ["git", "commit", "-q", "--no-verify", "-m", "calc: add()"],
    ):
        proc.run(argv, cwd=repo, env=env)
    plan = root / "demo-plan.toml"
    import tomli_w

    plan.write_text(tomli_w.dumps(plan_data(sys.executable)))
    return repo, plan


def run_demo(path: Path | None, settings: Settings, *, echo: Callable[[str], None]) -> ExitCode:
    """`forge demo`: create the repository, record the plan and run it, saying what
    to look at next; `echo` prints a line (the run's live view shows in between)."""
    from forge.commands.run import execute
    from forge.git import repo as git
    from forge.plan import registry, tables
    from forge.run.options import RunOptions

    repo_path, plan_path = create(path)
    echo(f"demo repository: {repo_path}\nplan: {plan_path}\n")
    repo = git.discover(repo_path, settings)
    recorded = registry.record(repo, plan_path)
    echo(tables.wave_table(recorded.plan, recorded.as_waves()))
    answer, code = execute(repo, recorded, RunOptions(), as_json=False)
    echo(str(answer).removesuffix("\n"))
    if code == ExitCode.OK:
        echo(
            f"\nnext: cd {repo_path} && forge status && forge accept   "
            f"(then `git log --graph --oneline` to see the merges)\n"
            f"see the run: cd {repo_path} && forge report   "
            f"(one page: the DAG, the attempts, the verification, the costs)\n"
            f"your own plan: copy {plan_path} next to your repository, give each [[task]] "
            f"an id, the files it may change and a `prompt` (an agent) or a `run` "
            f"(a command), then `forge plan FILE` and `forge run`"
        )
    return code
