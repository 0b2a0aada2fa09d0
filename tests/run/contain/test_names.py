"""Any file name git can store: scope, conflicts, salvage and messages read paths
NUL-separated, so non-ASCII names, quotes, tabs, backslashes and newlines work."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from helpers.gitkit import git, run_forge
from helpers.runkit import plan_and_run, state, statuses, write_plan

NAMES = [
    "ünï.txt",
    "docs/résumé.md",
    'q"uote.txt',
    "tab\there.txt",
    "back\\slash.txt",
    "new\nline.txt",
]
DECLARED = ["ünï.txt", "docs/", 'q"uote.txt', "tab\there.txt", "back\\slash.txt", "new\nline.txt"]


def _writer(tmp: Path, names: list[str], tag: str = "w") -> str:
    """A shell task's command that writes each of `names` in its worktree."""
    script = tmp / f"write-{tag}.py"
    script.write_text(
        "import json, pathlib, sys\n"
        "for n in json.loads(sys.argv[1]):\n"
        "    p = pathlib.Path(n); p.parent.mkdir(parents=True, exist_ok=True)\n"
        "    p.write_text(sys.argv[2] + '\\n')\n"
    )
    data = tmp / f"names-{tag}.json"
    data.write_text(json.dumps(names))
    return f'{sys.executable} {script} \\"$(cat {data})\\" {tag}'


def _toml_list(items: list[str]) -> str:
    return "[" + ", ".join(json.dumps(i) for i in items) + "]"


def test_declared_names_of_any_kind_pass_the_scope(repo: Path, tmp_path: Path) -> None:
    body = (
        f'[[task]]\nid = "a"\nrun = "{_writer(tmp_path, NAMES)}"\nfiles = {_toml_list(DECLARED)}\n'
    )
    cp = plan_and_run(repo, write_plan(tmp_path, body))
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert statuses(repo) == {"a": "MERGED"}
    landed = git(repo, "ls-tree", "-r", "-z", "--name-only", "forge/p-integration")
    assert set(NAMES) <= set(landed.split("\0"))


def test_an_undeclared_name_is_named_as_written(repo: Path, tmp_path: Path) -> None:
    names = ["ünï.txt", "new\nline.txt"]
    body = f'[[task]]\nid = "a"\nrun = "{_writer(tmp_path, names)}"\nfiles = ["other.txt"]\n'
    cp = plan_and_run(repo, write_plan(tmp_path, body))
    assert cp.returncode == 5
    reason = state(repo)["tasks"]["a"]["reason"]
    assert reason == "changed files outside its declared files: new\\nline.txt, ünï.txt"
    assert "ünï.txt" in cp.stdout and "\\303" not in cp.stdout


def test_a_conflict_names_the_path(repo: Path, tmp_path: Path) -> None:
    body = (
        'scope = "warn"\nmax_parallel = 2\n'
        f'[[task]]\nid = "a"\nrun = "{_writer(tmp_path, ["docs/résumé.md"], "a")}"\n'
        'files = ["docs/"]\n'
        f'[[task]]\nid = "b"\nrun = "{_writer(tmp_path, ["docs/résumé.md"], "b")}"\n'
        'files = ["b.txt"]\n'
    )
    cp = plan_and_run(repo, write_plan(tmp_path, body))
    assert cp.returncode == 5, cp.stdout + cp.stderr
    st = state(repo)["tasks"]
    loser = next(t for t in st.values() if t["status"] == "CONFLICT")
    assert loser["reason"].startswith("conflicts with integration in: docs/résumé.md")


def test_clean_salvages_work_under_any_name(repo: Path, tmp_path: Path) -> None:
    body = '[[task]]\nid = "a"\nrun = "echo work > a.txt; exit 1"\nfiles = ["a.txt"]\n'
    assert plan_and_run(repo, write_plan(tmp_path, body)).returncode == 5
    slot = Path(next(iter(state(repo)["slots"].values()))["path"])
    for name in NAMES:
        (slot / name).parent.mkdir(exist_ok=True)
        (slot / name).write_text("by hand\n")
    cp = run_forge(repo, "clean")
    assert cp.returncode == 0, cp.stderr
    refs = git(repo, "for-each-ref", "--format=%(refname)", "refs/forge/salvage/").split()
    saved = {
        n for r in refs for n in git(repo, "ls-tree", "-r", "-z", "--name-only", r).split("\0")
    }
    assert set(NAMES) <= saved
