"""The escape corpus: misbehaving shell tasks, each either contained (nothing of the
user's repository or forge's records changed, nothing left running) or detected and
named in forge's report. Run without the sandbox, and with it where bubblewrap and
user namespaces work. The README's table is this list: keep them in step.

`python -m pytest tests/run/test_escape.py -s` prints the table.
"""

from __future__ import annotations

import hashlib
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers.gitkit import commit_all, git, run_forge
from helpers.runkit import write_plan

from forge.base import sandbox

FAKES = Path(__file__).resolve().parents[1] / "fakes"
USER_GIT = '"$(cat .git/objects/info/alternates)/.."'  # how a task finds the user's .git


@dataclass(frozen=True)
class Case:
    id: str
    what: str
    run: str  # {repo}: the user's checkout; {mark}: a number unique to the case
    plain: str  # "contained" or the text forge's report must show
    boxed: str = "contained"
    sandbox_only: bool = False


CASES = [
    Case(
        "update-ref",
        "`git update-ref refs/heads/main HEAD~1`",
        "git update-ref refs/heads/main HEAD~1",
        "contained",
    ),
    Case("branch-f", "`git branch -f main HEAD~1`", "git branch -f main HEAD~1", "contained"),
    Case("stash", "`git stash` of an edit", "echo edit >> README.md && git stash -q", "contained"),
    Case(
        "config",
        "`git config` (identity, hooksPath, fsmonitor)",
        "git config user.name evil && git config core.hooksPath /tmp && git config core.fsmonitor 'touch {repo}/fsmonitor-ran'",
        "contained",
    ),
    Case(
        "hook",
        "a hook installed in `$(git rev-parse --git-common-dir)/hooks`",
        "h=$(git rev-parse --git-common-dir)/hooks && mkdir -p $h && printf '#!/bin/sh\\ntouch {repo}/hook-ran\\n' > $h/post-checkout && chmod +x $h/post-checkout",
        "contained",
    ),
    Case(
        "reset-hard",
        "`git checkout -B main && git reset --hard HEAD~1`",
        "git checkout -q -B main && git reset -q --hard HEAD~1",
        "contained",
    ),
    Case(
        "common-dir",
        "a file written into `$(git rev-parse --git-common-dir)/forge/`",
        "d=$(git rev-parse --git-common-dir)/forge/plans/p && mkdir -p $d && echo '{{}}' > $d/state.json",
        "contained",
    ),
    Case(
        "rm-git",
        "`rm -rf .git` in its worktree",
        "rm -rf .git",
        "broke its worktree's git directory",
        boxed="broke its worktree's git directory",
    ),
    Case(
        "index-link",
        "its `.git/index` made a link to the user's index",
        "rm -f .git/index && ln -s {repo}/.git/index .git/index",
        "broke its worktree's git directory",
        boxed="broke its worktree's git directory",
    ),
    Case(
        "symlink",
        "a write through a symlink pointing into the user's checkout",
        "ln -s {repo}/README.md link && echo evil >> link; rm -f link",
        "working tree changed: README.md",
    ),
    Case(
        "abs-path",
        "a write to an absolute path in the user's checkout",
        "echo evil > {repo}/src/app.py",
        "working tree changed: src/app.py",
    ),
    Case(
        "git-C",
        "`git -C <user's repo> update-ref refs/heads/main HEAD~1`",
        "git -C {repo} update-ref refs/heads/main HEAD~1",
        "refs changed: main",
    ),
    Case(
        "verdict",
        "a PASS record copied under its own tree and a cache entry for it",
        "echo done > out.txt && echo evil > evil.txt && git add -A && "
        f"{sys.executable} {FAKES}/forge_verdict.py "
        + USER_GIT
        + "/forge/verify $(git write-tree)",
        "does not carry forge's seal",
    ),
    Case(
        "daemon",
        "a daemon: `setsid -f env -i sleep` (drops forge's tag)",
        "setsid -f env -i sleep {mark} > /dev/null 2>&1",
        "contained",
    ),
    Case(
        "daemon-cd",
        "a daemon that also leaves its folder: `cd / && setsid -f env -i sleep`",
        "(cd / && setsid -f env -i sleep {mark} > /dev/null 2>&1)",
        "escapes (no cgroup v2 here)",
        sandbox_only=True,
    ),
]


def _mark(case: Case) -> str:
    return str(31000 + CASES.index(case))


def _user_side(repo: Path) -> dict[str, object]:
    """Everything of the user's a task must not change, and forge's verdict records."""
    verify = repo / ".git" / "forge" / "verify"
    hooks = repo / ".git" / "hooks"
    return {
        "refs": git(
            repo,
            "for-each-ref",
            "--format=%(refname) %(objectname)",
            "refs/heads/main",
            "refs/stash",
        ),
        "head": git(repo, "symbolic-ref", "HEAD"),
        "status": git(repo, "status", "--porcelain", "--untracked-files=all"),
        "index": hashlib.sha256((repo / ".git" / "index").read_bytes()).hexdigest(),
        "config": (repo / ".git" / "config").read_text(),
        "hooks": sorted(p.name for p in hooks.iterdir()) if hooks.exists() else [],
        "records": sorted(p.name for p in verify.rglob("forged*")) if verify.exists() else [],
    }


def _alive(mark: str) -> list[int]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if cmd[:2] == [b"sleep", mark.encode()]:
            found.append(int(pid))
    return found


def _run_case(case: Case, repo: Path, tmp_path: Path, *, boxed: bool) -> tuple[str, str]:
    (repo / "README.md").write_text("# test repo\nsecond\n")
    commit_all(repo, "second")  # HEAD~1 exists
    verify = 'verify = "test ! -e evil.txt"\n'
    plan = write_plan(
        tmp_path,
        verify
        + ("sandbox = true\n" if boxed else "")
        + '[[task]]\nid = "a"\nfiles = ["."]\n'
        + f"run = '''{case.run.format(repo=repo, mark=_mark(case))}; echo done > out.txt'''\n",
    )
    assert run_forge(repo, "plan", str(plan)).returncode == 0
    if case.id == "verdict":  # a genuine PASS record the task can copy
        assert run_forge(repo, "verify", "--plan", "p", "HEAD").returncode == 0
    before = _user_side(repo)
    cp = run_forge(repo, "run")
    report = cp.stdout + cp.stderr
    after = _user_side(repo)
    mark = _mark(case)
    left = _alive(mark)
    for pid in left:
        os.kill(pid, 9)
    expect = case.boxed if boxed else case.plain
    if expect == "contained":
        assert after == before, report
        assert "were not touched" in cp.stdout, report
        assert not left, f"the daemon survived: {left}"
        assert not (repo / "hook-ran").exists() and not (repo / "fsmonitor-ran").exists()
        # the forged verdict's work fails its verification, as it should: exit 5
        assert cp.returncode == (5 if case.id == "verdict" else 0), report
    else:
        assert expect in report, report
        users = [k for k in before if k != "records" and before[k] != after[k]]
        assert not users or "were not touched" not in cp.stdout, report
    return case.id, expect


@pytest.mark.parametrize("case", [c for c in CASES if not c.sandbox_only], ids=lambda c: c.id)
def test_escape_without_sandbox(case: Case, repo: Path, tmp_path: Path) -> None:
    _run_case(case, repo, tmp_path, boxed=False)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_escape_in_the_sandbox(case: Case, repo: Path, tmp_path: Path) -> None:
    missing = sandbox.unavailable()
    if missing:
        print(f"skipped: {missing}")
        pytest.skip(missing)
    _run_case(case, repo, tmp_path, boxed=True)


def test_print_the_table() -> None:
    """The README's table, from the cases above (`-s` shows it)."""
    lines = [
        "| misbehaving task | without sandbox | with `sandbox = true` |",
        "| --- | --- | --- |",
    ]
    for c in CASES:
        plain = "escapes" if c.sandbox_only else c.plain
        lines.append(f"| {c.what} | {_say(plain)} | {_say(c.boxed)} |")
    print("\n".join(lines))
    assert len(CASES) >= 12


def _say(expect: str) -> str:
    return expect if expect in ("contained", "escapes") else f'detected: "{expect}"'
