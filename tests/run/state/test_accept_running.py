"""`forge accept` while its plan runs: refused (exit 2, naming the run's pid), or with
`--now` the head verified so far, which the run then does not report as a change
someone else made to the user's repository."""

from __future__ import annotations

import subprocess
from pathlib import Path

from helpers.gitkit import git, run_forge
from helpers.runkit import spawn_forge, state, wait_for, write_plan


def _body(go: Path) -> str:
    return (
        'verify = "true"\nmax_parallel = 2\n'
        '[[task]]\nid = "a"\nfiles = ["a.txt"]\nrun = "echo a > a.txt"\n'
        f'[[task]]\nid = "b"\nfiles = ["b.txt"]\n'
        f'run = "while [ ! -f {go} ]; do sleep 0.02; done; echo b > b.txt"\n'
    )


def _a_landed(repo: Path) -> bool:
    try:
        st = state(repo)
    except FileNotFoundError:
        return False
    head = git(repo, "rev-parse", "--verify", "-q", "forge/p-integration")
    verified = st.get("verification") or {}
    return st["tasks"]["a"]["status"] == "MERGED" and verified.get("commit") == head


def _start(repo: Path, tmp_path: Path) -> tuple[subprocess.Popen[str], Path]:
    go = tmp_path / "go"
    assert run_forge(repo, "plan", str(write_plan(tmp_path, _body(go)))).returncode == 0
    run = spawn_forge(repo, "run")
    wait_for(lambda: _a_landed(repo), what="a to land")
    return run, go


def test_accept_during_its_run_is_refused_naming_the_run(repo: Path, tmp_path: Path) -> None:
    run, go = _start(repo, tmp_path)
    try:
        head = git(repo, "rev-parse", "HEAD")
        cp = run_forge(repo, "accept", "p")
        assert cp.returncode == 2, cp.stdout + cp.stderr
        assert f"pid {run.pid} (forge run)" in cp.stderr and "forge accept p --now" in cp.stderr
        assert git(repo, "rev-parse", "HEAD") == head
    finally:
        go.touch()
        out, err = run.communicate(timeout=120)
    assert run.returncode == 0, out + err
    assert "your repository changed" not in out
    cp = run_forge(repo, "accept", "p")
    assert cp.returncode == 0 and "landed 2 task(s)" in cp.stdout, cp.stdout + cp.stderr


def test_accept_now_takes_the_verified_head_and_the_run_does_not_blame_it(
    repo: Path, tmp_path: Path
) -> None:
    run, go = _start(repo, tmp_path)
    try:
        cp = run_forge(repo, "accept", "p", "--now")
        assert cp.returncode == 0, cp.stdout + cp.stderr
        assert "landed 1 task(s): p/a" in cp.stdout and "not landed: b" in cp.stdout
        assert (repo / "a.txt").exists() and not (repo / "b.txt").exists()
    finally:
        go.touch()
        out, err = run.communicate(timeout=120)
    assert run.returncode == 0, out + err
    assert "your repository changed" not in out, out
    assert not state(repo).get("touched")
    cp = run_forge(repo, "accept", "p")
    assert cp.returncode == 0 and "landed 1 task(s): p/b" in cp.stdout, cp.stdout + cp.stderr
