"""Verdicts the gate can be bet on, through the real CLI: a task whose commit
shares no history with its base fails alone, an interrupted verification is
recorded as such, a deterministic failure is confirmed once, and status and the
report tell one story."""

from __future__ import annotations

import json
import math
import shlex
import signal
import sys
from pathlib import Path

import pytest
from helpers.gitkit import FAKES, git, run_forge
from helpers.runkit import (
    assert_integration_verified,
    plan_and_run,
    spawn_forge,
    state,
    statuses,
    wait_for,
    write_plan,
)

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
    assert statuses(repo) == {"a": "MERGED", "o": "CONFLICT", "c": "MERGED"}
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


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_stop_during_a_batch_is_recorded_as_interrupted(
    repo: Path, tmp_path: Path, sig: signal.Signals
) -> None:
    started = tmp_path / "verify-started"
    hang = f"if [ ! -f {started} ]; then touch {started}; sleep 600; fi; exit 0"
    assert run_forge(repo, "plan", str(write_plan(tmp_path, gated(hang, body3())))).returncode == 0
    p = spawn_forge(repo, "run", env={"FORGE_GRACE": "0.5"})
    wait_for(started.exists, what="the batch's verification started")
    p.send_signal(sig)
    out, err = p.communicate(timeout=60)
    assert p.returncode in (130, 143), out + err
    assert statuses(repo) == dict.fromkeys("abc", "QUEUED")
    text = run_forge(repo, "status").stdout
    assert "verification: INTERRUPTED (batch on " in text, text
    assert "of a, b, c); batch a, b, c stays QUEUED" in text, text
    assert "not run" not in text
    last = json.loads(run_forge(repo, "status", "--json").stdout)["gate"]["last"]
    assert last["verdict"] == "INTERRUPTED" and last["batch"] == ["a", "b", "c"]
    cp = run_forge(repo, "run")
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert assert_integration_verified(repo) == 1
    assert "INTERRUPTED" not in run_forge(repo, "status").stdout


def test_sigint_during_a_bisection_step_names_the_step(repo: Path, tmp_path: Path) -> None:
    counter, started = tmp_path / "n", tmp_path / "probe-started"
    verify = (
        f"n=$(cat {counter} 2>/dev/null || echo 0); echo $((n + 1)) > {counter}; "
        f"if [ $n = 1 ]; then touch {started}; sleep 600; fi; test ! -f x.txt"
    )
    body = gated(verify, body3() + task("x"))
    assert run_forge(repo, "plan", str(write_plan(tmp_path, body))).returncode == 0
    p = spawn_forge(repo, "run", env={"FORGE_GRACE": "0.5"})
    wait_for(started.exists, what="the bisection's first probe")
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 130, out + err
    text = run_forge(repo, "status").stdout
    assert "verification: INTERRUPTED (bisection on " in text, text
    assert "of a, b); batch a, b, c, x stays QUEUED" in text, text


def body3() -> str:
    return task("a") + task("b") + task("c")


@pytest.mark.slow
def test_one_deterministic_culprit_among_eight_costs_six_runs(repo: Path, tmp_path: Path) -> None:
    counter = tmp_path / "n"
    ids = [f"t{i}" for i in range(8)]
    verify = counting(counter, "--fail-if", "t5.txt")
    body = gated(verify, "".join(task(t) for t in ids), reruns=2)
    cp = plan_and_run(repo, write_plan(tmp_path, body))
    assert cp.returncode == 5, cp.stdout + cp.stderr
    assert statuses(repo) == {t: "FAILED" if t == "t5" else "MERGED" for t in ids}
    # the batch and its one confirming rerun, 3 bisection steps, the batch after it
    assert runs(counter) == 2 + math.ceil(math.log2(8)) + 1 == 6
    assert_integration_verified(repo)
    # One story: status shows the failing verification beside the head's verdict ...
    text = run_forge(repo, "status").stdout
    assert "verification: PASS on " in text
    assert "(candidate t0, t1, t2, t3, t4, t5; culprit t5)" in text, text
    assert "  failing: lane verify (log " in text
    last = json.loads(run_forge(repo, "status", "--json").stdout)["gate"]["last"]
    assert last["culprit"] == "t5" and last["verdict"] == "FAIL"
    # ... and the report lists every verification the gate ran, its badge the outcome.
    assert run_forge(repo, "report").returncode == 0
    page = (repo / ".git" / "forge" / "plans" / "p" / "report.html").read_text()
    assert 'class="verdict v-mixed">PASS \u00b7 1 culprit<' in page
    steps = state(repo)["gate_steps"]
    assert [s["name"] for s in steps] == ["batch", "bisection", "bisection", "bisection", "batch"]
    assert [s["verdict"] for s in steps] == ["FAIL", "PASS", "FAIL", "PASS", "PASS"]
    assert [s["runs"] for s in steps] == [2, 1, 1, 1, 1]
    assert page.count("<tr><td>") >= len(steps)
    assert "<b>t5</b>" in page and ">verify</a>" in page
    assert "batch: FAIL of t0, t1, t2, t3, t4, t5, t6, t7" in page


def test_a_failing_new_test_is_not_rerun(repo: Path, tmp_path: Path) -> None:
    counter = tmp_path / "n"
    verify = (
        f"n=$(cat {counter} 2>/dev/null || echo 0); echo $((n + 1)) > {counter}; "
        'if [ -f t.py ]; then echo "FAILED t.py::test_new - boom"; exit 1; fi'
    )
    new = "printf 'def test_new():\\n    assert False\\n' > t.py"
    body = gated(verify, task("a") + task("t", new).replace('"t.txt"', '"t.py"'), reruns=2)
    cp = plan_and_run(repo, write_plan(tmp_path, body))
    assert cp.returncode == 5, cp.stdout + cp.stderr
    assert statuses(repo) == {"a": "MERGED", "t": "FAILED"}
    assert runs(counter) == 2  # the batch, once (a new test is no known flake), and a alone
    last = json.loads(run_forge(repo, "status", "--json").stdout)["gate"]["last"]
    assert [f["test"] for f in last["failures"]] == ["t.py::test_new"]


@pytest.mark.slow
def test_a_culprit_last_in_the_batch_costs_no_more(repo: Path, tmp_path: Path) -> None:
    counter = tmp_path / "n"
    ids = [f"t{i}" for i in range(8)]
    body = gated(counting(counter, "--fail-if", "t7.txt"), "".join(task(t) for t in ids), reruns=2)
    assert plan_and_run(repo, write_plan(tmp_path, body)).returncode == 5
    assert statuses(repo)["t7"] == "FAILED"
    assert runs(counter) <= 2 + math.ceil(math.log2(8))


def test_bisection_judges_prefixes_at_once_under_verify_parallel(
    repo: Path, tmp_path: Path
) -> None:
    counter = tmp_path / "n"
    ids = [f"t{i}" for i in range(8)]
    verify = counting(counter, "--fail-if", "t5.txt")
    body = gated(verify, "".join(task(t) for t in ids), extra="verify_parallel = 3\n")
    cp = plan_and_run(repo, write_plan(tmp_path, body))
    assert cp.returncode == 5, cp.stdout + cp.stderr
    assert statuses(repo) == {t: "FAILED" if t == "t5" else "MERGED" for t in ids}
    steps = [s for s in state(repo)["gate_steps"] if s["name"] == "bisection"]
    # two rounds of at most 3 prefixes (log4 8), the first judged at once
    assert 3 <= len(steps) <= 6
    assert steps[1]["start"] < steps[0]["end"]
    assert_integration_verified(repo)
