"""`forge verify` as a user runs it: exit codes, output, and real signals."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.gitkit import commit_all, forge_cmd, run_forge
from helpers.runkit import alive as running
from helpers.runkit import wait_for

FAKES = Path(__file__).resolve().parents[1] / "fakes"
PY = sys.executable


def configure(repo: Path, lanes: dict[str, str], *, reruns: int = 1) -> None:
    body = "".join(f"{name} = {json.dumps(cmd)}\n" for name, cmd in lanes.items())
    (repo / "forge.toml").write_text(
        f'[verify]\nreruns = {reruns}\ngrace = "0.5s"\n[verify.lanes]\n{body}'
    )
    commit_all(repo, "verify config")


def test_pass_then_remembered(repo: Path) -> None:
    configure(repo, {"unit": "echo fine"})
    first = run_forge(repo, "verify")
    assert first.returncode == 0, first.stderr
    assert "lane unit: PASS" in first.stdout
    assert "verification PASS" in first.stdout
    second = run_forge(repo, "verify")
    assert second.returncode == 0
    assert "remembered verdict" in second.stdout


def test_fail_exits_5_naming_the_log(repo: Path) -> None:
    configure(repo, {"unit": "echo fine", "lint": "echo bad; exit 1"})
    res = run_forge(repo, "verify", "--json")
    assert res.returncode == 5
    data = json.loads(res.stdout)
    assert data["verdict"] == "FAIL"
    assert data["lanes"]["unit"]["verdict"] == "PASS"
    assert len(data["lanes"]["lint"]["runs"]) == 2
    assert "forge: verification FAIL" in res.stderr and "lint-2.log" in res.stderr


def test_a_failure_that_fails_again_alike_is_confirmed_with_two_runs(
    repo: Path, tmp_path: Path
) -> None:
    # As the gate confirms: a rerun that fails as the first did ends the reruns (a
    # flake must fail twice in a row to fail the verification, as to eject a task).
    configure(repo, {"same": "echo bad; exit 1"}, reruns=2)
    res = run_forge(repo, "verify", "--json")
    assert res.returncode == 5
    assert len(json.loads(res.stdout)["lanes"]["same"]["runs"]) == 2
    counter = tmp_path / "n"
    configure(repo, {"other": f"{PY} {FAKES / 'verify_flaky.py'} {counter} 2"}, reruns=2)
    res = run_forge(repo, "verify")
    assert res.returncode == 5, res.stdout + res.stderr
    assert "lane other: FAIL (2 runs)" in res.stdout


def test_flaky_exits_0(repo: Path, tmp_path: Path) -> None:
    configure(repo, {"unit": f"{PY} {FAKES / 'verify_flaky.py'} {tmp_path / 'n'} 1"})
    res = run_forge(repo, "verify")
    assert res.returncode == 0, res.stderr
    assert "lane unit: FLAKY (2 runs)" in res.stdout
    assert "verification FLAKY" in res.stdout


def test_unverified_without_config(repo: Path) -> None:
    res = run_forge(repo, "verify")
    assert res.returncode == 0
    assert "UNVERIFIED" in res.stdout


def test_unknown_rev_is_usage_error(repo: Path) -> None:
    res = run_forge(repo, "verify", "no-such-rev")
    assert res.returncode == 2
    assert "unknown revision 'no-such-rev'" in res.stderr


def _sigint_when_ready(
    repo: Path, pidfile: Path
) -> tuple[subprocess.CompletedProcess[str], list[int]]:
    child = subprocess.Popen(
        forge_cmd("verify", "--json"),
        cwd=repo,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    try:
        wait_for(pidfile.exists, what="the verifier's pid file")
        pids = [int(p) for p in pidfile.read_text().split()]
        assert all(running(p) for p in pids)
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
    return subprocess.CompletedProcess(child.args, child.returncode, out, err), pids


@pytest.mark.usefixtures("unboxed")  # its verifier writes down its pids
def test_sigint_stops_stubborn_lane_with_grandchildren(repo: Path, tmp_path: Path) -> None:
    pidfile = tmp_path / "pids"
    configure(repo, {"slow": f"{PY} {FAKES / 'verify_stubborn.py'} {pidfile}"})
    res, pids = _sigint_when_ready(repo, pidfile)
    assert res.returncode == 130, res.stderr
    assert not any(running(p) for p in pids)
    assert "interrupted" in res.stderr
    data = json.loads(res.stdout)
    assert data["verdict"] == "INTERRUPTED"
    (run,) = data["lanes"]["slow"]["runs"]
    assert run["stopped"]
    log = Path(run["log"]).read_text()
    assert "sent TERM" in log and "sent KILL" in log


@pytest.mark.usefixtures("unboxed")  # its verifier writes down its pids
def test_sigint_during_rerun_is_not_rerun_again(repo: Path, tmp_path: Path) -> None:
    pidfile = tmp_path / "pids"
    first = tmp_path / "first"
    stubborn = f"{PY} {FAKES / 'verify_stubborn.py'} {pidfile}"
    cmd = f"if [ -f {first} ]; then exec {stubborn}; else touch {first}; exit 1; fi"
    configure(repo, {"unit": cmd}, reruns=3)
    res, pids = _sigint_when_ready(repo, pidfile)
    assert res.returncode == 130
    assert not any(running(p) for p in pids)
    runs = json.loads(res.stdout)["lanes"]["unit"]["runs"]
    assert [(r["kind"], r["stopped"]) for r in runs] == [("initial", False), ("rerun", True)]


def test_sigterm_is_a_stop_too(repo: Path, tmp_path: Path) -> None:
    marker = tmp_path / "started"
    configure(repo, {"slow": f"touch {marker}; sleep 60"})
    child = subprocess.Popen(
        forge_cmd("verify"), cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    wait_for(marker.exists, what="the lane to start")
    child.send_signal(signal.SIGTERM)
    _out, err = child.communicate(timeout=60)
    assert child.returncode == 130, err


def test_plan_records_only_a_verification_of_its_integration_head(repo: Path) -> None:
    from forge.git.repo import discover
    from forge.run.state.store import StateStore

    configure(repo, {"done": "test -f done.txt"}, reruns=0)
    (repo / "plans").mkdir()
    (repo / "plans" / "p.toml").write_text(
        'name = "p"\n[[task]]\nid = "t"\nrun = "echo done > done.txt"\nfiles = ["done.txt"]\n'
    )
    assert run_forge(repo, "plan", "plans/p.toml").returncode == 0
    ran = run_forge(repo, "run", "p")
    assert ran.returncode == 0, ran.stderr
    r = discover(repo)
    head = r.rev_parse("refs/heads/forge/p-integration")
    ok = run_forge(repo, "verify", "--plan", "p")
    assert ok.returncode == 0, ok.stderr

    def recorded() -> tuple[str, str]:
        state = StateStore(r.state, "p").load_existing()
        assert state is not None and state.verification is not None
        return state.verification.commit, state.verification.verdict

    assert recorded() == (head, "PASS")
    # Another commit (here the base, which lacks the task's work) is verified but
    # must not stand for the plan: accept reads this verdict.
    base = r.rev_parse("main")
    other = run_forge(repo, "verify", "--plan", "p", "main")
    assert other.returncode == 5
    assert "not the integration head" in other.stderr
    assert recorded() == (head, "PASS"), base
