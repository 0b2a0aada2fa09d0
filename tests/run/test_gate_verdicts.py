"""Verdicts the gate can be bet on, through the real CLI: a task whose commit
shares no history with its base fails alone, an interrupted verification is
recorded as such, a deterministic failure is confirmed once, and status and the
report tell one story."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from helpers.gitkit import FAKES, git, run_forge
from helpers.runkit import assert_integration_verified, plan_and_run, state, statuses, write_plan

PY = shlex.quote(sys.executable)

ORPHAN = (
    "echo o > o.txt && git add o.txt && "
    'c=$(git commit-tree "$(git write-tree)" -m orphan) && git reset -q --hard "$c"'
)


def task(tid: str, run: str | None = None) -> str:
    run = run or f"echo {tid} > {tid}.txt"
    return f"[[task]]\nid = \"{tid}\"\nrun = '''{run}'''\nfiles = [\"{tid}.txt\"]\n"


def gated(verify: str, body: str, *, reruns: int = 0, gate: str = "end", extra: str = "") -> str:
    return (
        f"verify = '''{verify}'''\nverify_reruns = {reruns}\ngate = \"{gate}\"\n"
        f"max_parallel = 1\n{extra}" + body
    )


def counting(counter: Path, *conditions: str) -> str:
    return f"{PY} {FAKES / 'verify_count.py'} {counter} " + " ".join(conditions)


def runs(counter: Path) -> int:
    return int(counter.read_text()) if counter.exists() else 0


def test_an_orphan_commit_fails_its_task_alone_and_can_be_retried(
    repo: Path, tmp_path: Path
) -> None:
    counter = tmp_path / "n"
    body = gated(counting(counter), task("a") + task("o", ORPHAN) + task("c"))
    cp = plan_and_run(repo, write_plan(tmp_path, body))
    assert cp.returncode == 5, cp.stdout + cp.stderr
    assert statuses(repo) == {"a": "MERGED", "o": "FAILED", "c": "MERGED"}
    assert state(repo)["tasks"]["o"]["reason"] == "its commit shares no history with its base"
    assert_integration_verified(repo)
    again = run_forge(repo, "retry", "o")
    assert again.returncode == 5, again.stdout + again.stderr
    assert len(state(repo)["tasks"]["o"]["attempts"]) == 2
    assert run_forge(repo, "run").returncode == 5  # never 2: the plan is not wedged


def test_a_commit_with_no_common_history_is_refused_by_the_merge(repo: Path) -> None:
    from forge.git.merge import UNRELATED, merge_onto
    from forge.git.repo import discover

    head = git(repo, "rev-parse", "HEAD")
    tree = git(repo, "write-tree")
    orphan = git(repo, "commit-tree", tree, "-m", "orphan")
    res = merge_onto(discover(repo), head, orphan, message="m")
    assert not res.merged and res.refused == UNRELATED
