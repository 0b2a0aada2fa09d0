"""The gated integration branch end to end: real git, the real CLI, and counting
verifiers (tests/fakes/verify_count.py, verify_flaky.py). After every run the
integration branch's reflog holds only commits whose tree passed."""

from __future__ import annotations

import json
import math
import shlex
import signal
import sys
from pathlib import Path

from helpers.gitkit import FAKES, commit_all, git, run_forge
from helpers.runkit import (
    assert_integration_verified,
    kill9,
    merge_count,
    plan_and_run,
    spawn_forge,
    state,
    statuses,
    wait_for,
    write_plan,
)

PY = shlex.quote(sys.executable)


def tasks(*ids: str, deps: dict[str, str] | None = None) -> str:
    out = ""
    for tid in ids:
        out += f'[[task]]\nid = "{tid}"\nrun = "echo {tid} > {tid}.txt"\nfiles = ["{tid}.txt"]\n'
        if deps and tid in deps:
            out += f'deps = ["{deps[tid]}"]\n'
    return out


def counting(counter: Path, *conditions: str) -> str:
    return f"{PY} {FAKES / 'verify_count.py'} {counter} " + " ".join(conditions)


def plan(
    verify: str, body: str, *, gate: str = "end", max_parallel: int = 1, extra: str = ""
) -> str:
    return (
        f"verify = '''{verify}'''\nverify_reruns = 0\ngate = \"{gate}\"\n"
        f"max_parallel = {max_parallel}\n{extra}" + body
    )


def runs(counter: Path) -> int:
    return int(counter.read_text()) if counter.exists() else 0


def test_a_batch_lands_and_each_task_names_its_verification(repo: Path, tmp_path: Path) -> None:
    counter = tmp_path / "n"
    ids = [f"t{i}" for i in range(6)]
    body = plan(counting(counter), tasks(*ids), gate="queue", max_parallel=3)
    cp = plan_and_run(repo, write_plan(tmp_path, body), "--json")
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert statuses(repo) == dict.fromkeys(ids, "MERGED")
    assert all(merge_count(repo, t) == 1 for t in ids)
    landings = assert_integration_verified(repo)
    assert runs(counter) == landings <= len(ids), "one verification a landed batch"
    assert json.loads(cp.stdout)["gate_verifications"] == landings
    st = state(repo)
    head = git(repo, "rev-parse", "forge/p-integration")
    assert st["verification"]["commit"] == head and st["verification"]["verdict"] == "PASS"
    assert st["gate"] is None
    status = json.loads(run_forge(repo, "status", "--json").stdout)
    for row in status["tasks"]:
        assert row["verified_by"]["verdict"] == "PASS"
    assert status["gate"]["queued"] == [] and status["gate"]["batch"] is None
    assert "landed by verification" in run_forge(repo, "status").stdout


def test_one_culprit_among_eight_is_found_by_bisection(repo: Path, tmp_path: Path) -> None:
    counter = tmp_path / "n"
    ids = [f"t{i}" for i in range(8)]
    body = plan(counting(counter, "--fail-if", "t5.txt"), tasks(*ids))
    cp = plan_and_run(repo, write_plan(tmp_path, body))
    assert cp.returncode == 5, cp.stdout + cp.stderr
    assert statuses(repo) == {t: "FAILED" if t == "t5" else "MERGED" for t in ids}
    assert runs(counter) <= 1 + math.ceil(math.log2(8)) + 1
    reason = state(repo)["tasks"]["t5"]["reason"]
    assert reason.startswith("breaks verification: lane verify exit 1 (log "), reason
    log = Path(reason.split("(log ")[1].rstrip(")"))
    assert "broken by t5.txt" in log.read_text()
    head = git(repo, "rev-parse", "forge/p-integration")
    assert "t5.txt" not in git(repo, "ls-tree", "--name-only", head).split()
    assert_integration_verified(repo)
    # the final verdict is the last landed batch's: no verification after it
    assert state(repo)["verification"]["commit"] == head
    assert "verification: PASS" in cp.stdout
    # Each verification the gate ran is kept for the report's timeline.
    steps = state(repo)["gate_steps"]
    names = [s["name"] for s in steps]
    assert names[0] == "batch" and "bisection" in names, names
    assert all(s["start"] <= s["end"] for s in steps)
    report = run_forge(repo, "report")
    assert report.returncode == 0, report.stderr
    page = (repo / ".git" / "forge" / "plans" / "p" / "report.html").read_text()
    assert ">bisection<" in page and ">batch<" in page


def test_a_pair_that_fails_together_blames_the_later_task(repo: Path, tmp_path: Path) -> None:
    counter = tmp_path / "n"
    ids = ["a", "b", "c", "d", "e", "f"]
    body = plan(counting(counter, "--fail-if-all", "b.txt,e.txt"), tasks(*ids))
    cp = plan_and_run(repo, write_plan(tmp_path, body))
    assert cp.returncode == 5, cp.stdout + cp.stderr
    assert statuses(repo) == {t: "FAILED" if t == "e" else "MERGED" for t in ids}
    assert_integration_verified(repo)


def test_a_flaky_verification_never_ejects_anyone(repo: Path, tmp_path: Path) -> None:
    counter = tmp_path / "n"
    verify = f"{PY} {FAKES / 'verify_flaky.py'} {counter} 1"
    body = plan(verify, tasks("a", "b", "c")).replace("verify_reruns = 0", "verify_reruns = 2")
    cp = plan_and_run(repo, write_plan(tmp_path, body))
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert statuses(repo) == dict.fromkeys("abc", "MERGED")
    assert runs(counter) == 2  # the failing run and its passing rerun: no bisection
    assert state(repo)["verification"]["verdict"] == "FLAKY"
    assert_integration_verified(repo)


def test_a_culprits_dependent_is_blocked_and_never_runs(repo: Path, tmp_path: Path) -> None:
    counter = tmp_path / "n"
    body = plan(counting(counter, "--fail-if", "b.txt"), tasks("a", "b", "c", deps={"c": "b"}))
    cp = plan_and_run(repo, write_plan(tmp_path, body))
    assert cp.returncode == 5
    assert statuses(repo) == {"a": "MERGED", "b": "FAILED", "c": "BLOCKED"}
    assert state(repo)["tasks"]["c"]["attempts"] == []
    assert "dependency b did not merge (FAILED)" in state(repo)["tasks"]["c"]["reason"]
    assert_integration_verified(repo)


def test_a_dependent_waits_for_its_dependency_to_land(repo: Path, tmp_path: Path) -> None:
    counter = tmp_path / "n"
    body = plan(counting(counter), tasks("a", "b", deps={"b": "a"}), gate="queue")
    cp = plan_and_run(repo, write_plan(tmp_path, body))
    assert cp.returncode == 0, cp.stdout + cp.stderr
    st = state(repo)
    a_landed = st["tasks"]["a"]["merged_commit"]
    assert git(repo, "merge-base", "--is-ancestor", a_landed, st["tasks"]["b"]["base"]) == ""
    assert_integration_verified(repo)


def test_the_culprits_retry_gets_the_verification_output(repo: Path, tmp_path: Path) -> None:
    counter = tmp_path / "n"
    copies = tmp_path / "prompt-$FORGE_ATTEMPT.md"
    argv = json.dumps(["bash", "-c", f'{PY} {FAKES}/agent_copy_prompt.py "{copies}" x.txt'])
    extra = f'[agents.fake]\ncommand = {argv}\nmodels = ["small"]\n'
    body = plan(
        counting(counter, "--fail-if", "x.txt"),
        tasks("a") + '[[task]]\nid = "x"\nprompt = "do x"\nagent = "fake"\nfiles = ["x.txt"]\n',
        extra=extra,
    )
    cp = plan_and_run(repo, write_plan(tmp_path, body))
    assert cp.returncode == 5
    assert statuses(repo) == {"a": "MERGED", "x": "FAILED"}
    last = state(repo)["tasks"]["x"]["attempts"][-1]
    assert last["status"] == "FAILED" and last["feedback_source"] == "verify:verify"
    cp = run_forge(repo, "retry", "x")
    assert cp.returncode == 5  # the fake changes x.txt again: still breaking
    second = (tmp_path / "prompt-2.md").read_text()
    assert "breaks verification: lane verify exit 1" in second
    assert "verify: broken by x.txt" in second  # the failing lane's log tail
    # it continues on its own work merged onto what landed (a.txt), to adapt to it
    retried = state(repo)["tasks"]["x"]["attempts"][-1]["commit"]
    assert {"a.txt", "x.txt"} <= set(git(repo, "ls-tree", "--name-only", retried).split())
    assert git(repo, "show", f"{retried}:x.txt").splitlines() == ["attempt 1", "attempt 2"]
    assert_integration_verified(repo)


def test_sigint_during_a_batch_lands_nothing_and_the_next_run_lands_once(
    repo: Path, tmp_path: Path
) -> None:
    started = tmp_path / "verify-started"
    hang = f"if [ ! -f {started} ]; then touch {started}; sleep 600; fi; exit 0"
    body = plan(hang, tasks("a", "b", "c"))
    assert run_forge(repo, "plan", str(write_plan(tmp_path, body))).returncode == 0
    p = spawn_forge(repo, "run", env={"FORGE_GRACE": "0.5"})
    wait_for(started.exists, what="the batch's verification started")
    status = json.loads(run_forge(repo, "status", "--json").stdout)
    assert status["gate"]["batch"] == ["a", "b", "c"]
    assert status["gate"]["phase"] == "verifying"
    assert "verifying a, b, c" in run_forge(repo, "status").stdout
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 130, out + err
    assert statuses(repo) == dict.fromkeys("abc", "QUEUED")
    assert git(repo, "rev-parse", "forge/p-integration") == git(repo, "rev-parse", "main")
    cp = run_forge(repo, "run")
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert statuses(repo) == dict.fromkeys("abc", "MERGED")
    assert all(merge_count(repo, t) == 1 for t in "abc")
    assert assert_integration_verified(repo) == 1


def test_gate_off_merges_as_tasks_finish_and_verifies_once(repo: Path, tmp_path: Path) -> None:
    counter = tmp_path / "n"
    body = plan(counting(counter, "--fail-if", "b.txt"), tasks("a", "b", "c"), gate="off")
    cp = plan_and_run(repo, write_plan(tmp_path, body))
    assert cp.returncode == 5
    assert statuses(repo) == dict.fromkeys("abc", "MERGED")
    assert runs(counter) == 1
    assert state(repo)["verification"]["verdict"] == "FAIL"
    reflog = git(repo, "reflog", "--format=%gs", "forge/p-integration").splitlines()
    assert len(reflog) == 4  # created, then one merge a task


def test_accept_takes_the_verified_head_and_names_what_did_not_land(
    repo: Path, tmp_path: Path
) -> None:
    counter = tmp_path / "n"
    body = plan(counting(counter, "--fail-if", "b.txt"), tasks("a", "b", "c"))
    assert plan_and_run(repo, write_plan(tmp_path, body)).returncode == 5
    cp = run_forge(repo, "accept")
    assert cp.returncode == 0, cp.stderr
    assert git(repo, "rev-parse", "HEAD") == git(repo, "rev-parse", "forge/p-integration")
    assert "landed 2 task(s): p/a, p/c" in cp.stdout
    assert "not landed: b (FAILED: breaks verification" in cp.stdout
    assert not (repo / "b.txt").exists()


def test_status_shows_the_bisection_and_sigint_during_it_lands_nothing(
    repo: Path, tmp_path: Path
) -> None:
    counter, started = tmp_path / "n", tmp_path / "probe-started"
    # The tip fails (x.txt is there); the first probe hangs until it is stopped.
    verify = (
        f"n=$(cat {counter} 2>/dev/null || echo 0); echo $((n + 1)) > {counter}; "
        f"if [ $n = 1 ]; then touch {started}; sleep 600; fi; test ! -f x.txt"
    )
    body = plan(verify, tasks("a", "b", "c", "x"))
    assert run_forge(repo, "plan", str(write_plan(tmp_path, body))).returncode == 0
    p = spawn_forge(repo, "run", env={"FORGE_GRACE": "0.5"})
    wait_for(started.exists, what="the bisection's first probe")
    status = json.loads(run_forge(repo, "status", "--json").stdout)
    assert status["gate"]["phase"] == "bisecting" and status["gate"]["left"] == 2
    assert "(bisecting: at most 2 verification(s) left)" in run_forge(repo, "status").stdout
    assert "queued for verification" in run_forge(repo, "retry", "a").stderr
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 130, out + err
    assert statuses(repo) == dict.fromkeys(["a", "b", "c", "x"], "QUEUED")
    assert git(repo, "rev-parse", "forge/p-integration") == git(repo, "rev-parse", "main")
    cp = run_forge(repo, "run")
    assert cp.returncode == 5, cp.stdout + cp.stderr
    assert statuses(repo) == {"a": "MERGED", "b": "MERGED", "c": "MERGED", "x": "FAILED"}
    assert all(merge_count(repo, t) == 1 for t in "abc")
    assert_integration_verified(repo)


def test_two_culprits_in_one_batch_are_both_found(repo: Path, tmp_path: Path) -> None:
    counter = tmp_path / "n"
    ids = ["a", "b", "c", "d", "e", "f"]
    verify = counting(counter, "--fail-if", "b.txt", "--fail-if", "e.txt")
    cp = plan_and_run(repo, write_plan(tmp_path, plan(verify, tasks(*ids))))
    assert cp.returncode == 5, cp.stdout + cp.stderr
    assert statuses(repo) == {t: "FAILED" if t in "be" else "MERGED" for t in ids}
    assert_integration_verified(repo)


def test_a_conflict_while_building_the_chain_is_left_out(repo: Path, tmp_path: Path) -> None:
    # `scope = "warn"` lets both tasks write README.md without declaring it: they do
    # not overlap on paper, so they run at once, and conflict in the chain.
    body = (
        'scope = "warn"\n'
        '[[task]]\nid = "a"\nrun = "echo a > a.txt; echo A > README.md"\nfiles = ["a.txt"]\n'
        '[[task]]\nid = "b"\nrun = "echo b > b.txt; echo B > README.md"\nfiles = ["b.txt"]\n'
        '[[task]]\nid = "c"\nrun = "echo c > c.txt"\nfiles = ["c.txt"]\n'
    )
    counter = tmp_path / "n"
    cp = plan_and_run(repo, write_plan(tmp_path, plan(counting(counter), body, max_parallel=3)))
    assert cp.returncode == 5, cp.stdout + cp.stderr
    st = statuses(repo)
    assert sorted(st.values()) == ["CONFLICT", "MERGED", "MERGED"], st
    loser = next(t for t, s in st.items() if s == "CONFLICT")
    assert "conflicts with integration in: README.md" in state(repo)["tasks"][loser]["reason"]
    assert runs(counter) == 1
    assert_integration_verified(repo)


def test_a_task_left_queued_merges_once_the_gate_is_off(repo: Path, tmp_path: Path) -> None:
    release = shlex.quote(str(tmp_path / "release"))
    verify = f"while [ ! -e {release} ]; do sleep 0.05; done"
    (repo / "forge.toml").write_text(f"[verify]\ncommand = '{verify}'\n")
    commit_all(repo, "verify")
    body = '[[task]]\nid = "a"\nrun = "echo a > a.txt"\nfiles = ["a.txt"]\n'
    assert run_forge(repo, "plan", str(write_plan(tmp_path, body))).returncode == 0
    p = spawn_forge(repo, "run")
    try:
        saved = repo / ".git" / "forge" / "plans" / "p" / "state.json"
        wait_for(lambda: saved.exists() and statuses(repo)["a"] == "QUEUED", what="a queued")
    finally:
        kill9(p)
        (tmp_path / "release").touch()  # (the killed run's verification ends)
    (repo / "forge.toml").unlink()
    commit_all(repo, "no verification")
    cp = run_forge(repo, "run")
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert "a: was queued for a gate that is off now: merged" in cp.stdout + cp.stderr
    assert statuses(repo)["a"] == "MERGED"
    assert git(repo, "show", "forge/p-integration:a.txt") == "a"
