"""The verification engine: lanes, flake reruns, fingerprints, stop, verdict cache."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest
from helpers.runkit import alive as running
from helpers.runkit import wait_for

from forge.errors import ForgeError
from forge.git.repo import Repository, discover
from forge.plan.repo_config import VerifyConfig
from forge.verify.checkout import checkout_path
from forge.verify.engine import (
    Ask,
    Verdict,
    VerifyRecord,
    cached_verdict,
    latest_record,
    verify_commit,
)
from forge.verify.pool import pool_name

FAKES = Path(__file__).resolve().parents[1] / "fakes"
PY = sys.executable


FIRST = pool_name(VerifyConfig(lanes=())) + "-1"  # the pool's first member: no setup, no env


def cfg(*lanes: tuple[str, str], reruns: int = 2, timeout: float = 3600) -> VerifyConfig:
    return VerifyConfig(lanes=tuple(lanes), reruns=reruns, timeout=timeout, grace=0.5)


@pytest.fixture
def r(repo: Path) -> Repository:
    return discover(repo)


def status_of(path: Path) -> str:
    return subprocess.run(
        ["git", "status", "--porcelain"], cwd=path, capture_output=True, text=True, check=True
    ).stdout


def test_pass_runs_in_a_checkout_of_its_own(r: Repository, tmp_path: Path) -> None:
    out = tmp_path / "where"
    rec = verify_commit(r, "HEAD", cfg(("unit", f"pwd > {out}")), key="t")
    assert rec.verdict == Verdict.PASS and not rec.cached
    where = Path(out.read_text().strip())
    assert where == checkout_path(r, FIRST, "unit")
    assert where != r.root and r.root not in where.parents
    assert status_of(r.root) == ""
    assert latest_record(r, "t") == rec


def test_flaky_lane_keeps_both_logs_and_is_cached(r: Repository, tmp_path: Path) -> None:
    counter = tmp_path / "count"
    cmd = f"{PY} {FAKES / 'verify_flaky.py'} {counter} 1"
    rec = verify_commit(r, "HEAD", cfg(("unit", cmd)), key="t")
    assert rec.verdict == Verdict.FLAKY
    (lane,) = rec.lanes
    assert [run.kind for run in lane.runs] == ["initial", "rerun"]
    assert [run.exit_code for run in lane.runs] == [1, 0]
    assert "failing run 1" in Path(lane.runs[0].log).read_text()
    assert "passing run 2" in Path(lane.runs[1].log).read_text()
    again = verify_commit(r, "HEAD", cfg(("unit", cmd)), key="t")
    assert again.cached and again.verdict == Verdict.FLAKY
    assert counter.read_text() == "2"  # not run again


def test_a_lane_that_fails_again_alike_is_confirmed_by_one_rerun(r: Repository) -> None:
    rec = verify_commit(r, "HEAD", cfg(("unit", "exit 3"), reruns=2), key="t")
    assert rec.verdict == Verdict.FAIL
    assert [run.exit_code for run in rec.lanes[0].runs] == [3, 3]
    assert cached_verdict(r, rec.tree, cfg(("unit", "exit 3"))) is None


def test_edit_of_tracked_file_fails_without_rerun(r: Repository) -> None:
    cmd = "echo changed >> README.md; exit 0"
    rec = verify_commit(r, "HEAD", cfg(("unit", cmd)), key="t")
    assert rec.verdict == Verdict.FAIL
    (run,) = rec.lanes[0].runs
    assert run.exit_code == 0 and run.changed == ("README.md",)
    co = checkout_path(r, FIRST, "unit")
    assert status_of(co) == ""  # restored
    assert status_of(r.root) == ""
    # The restored checkout is usable: the next verification is not refused.
    assert verify_commit(r, "HEAD", cfg(("unit", "true")), key="t").verdict == Verdict.PASS


def test_new_file_fails_but_ignored_file_does_not(r: Repository, repo: Path) -> None:
    (repo / ".gitignore").write_text("*.cache\n")
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    subprocess.run(["git", "commit", "-qm", "ignore"], cwd=repo, check=True)
    ok = verify_commit(r, "HEAD", cfg(("unit", "echo x > build.cache")), key="t")
    assert ok.verdict == Verdict.PASS
    bad = verify_commit(r, "HEAD", cfg(("unit", "mkdir -p new && echo x > new/f.txt")), key="t")
    assert bad.verdict == Verdict.FAIL
    assert bad.lanes[0].runs[0].changed == ("new/f.txt",)


def test_dirty_checkout_is_refused(r: Repository) -> None:
    verify_commit(r, "HEAD", cfg(("unit", "true")), key="t")
    (checkout_path(r, FIRST, "unit") / "README.md").write_text("hand edit\n")
    with pytest.raises(ForgeError, match="holds changes forge did not make"):
        verify_commit(r, "HEAD", cfg(("unit", "true")), key="t", ask=Ask(force=True))


def test_two_lanes_run_in_parallel_one_failing(r: Repository, tmp_path: Path) -> None:
    # Each lane waits for the other's mark: they can only both finish side by side.
    a, b = tmp_path / "a", tmp_path / "b"
    wait = "for i in $(seq 500); do [ -f {0} ] && break; sleep 0.01; done; [ -f {0} ]"
    lanes = (
        ("good", f"touch {a}; " + wait.format(b)),
        ("bad", f"touch {b}; " + wait.format(a) + "; exit 1"),
    )
    rec = verify_commit(r, "HEAD", cfg(*lanes, reruns=0), key="t")
    verdicts = {lane.name: lane.verdict for lane in rec.lanes}
    assert verdicts == {"good": Verdict.PASS, "bad": Verdict.FAIL}
    assert rec.verdict == Verdict.FAIL


def test_cache_answers_without_running_and_force_runs(r: Repository, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    config = cfg(("unit", f"echo run >> {marker}"))
    first = verify_commit(r, "HEAD", config, key="t")
    assert first.verdict == Verdict.PASS and marker.read_text() == "run\n"
    second = verify_commit(r, "HEAD", config, key="other")
    assert second.cached and second.id == first.id
    assert marker.read_text() == "run\n"
    third = verify_commit(r, "HEAD", config, key="t", ask=Ask(force=True))
    assert not third.cached and marker.read_text() == "run\nrun\n"
    # Another config is another question.
    fourth = verify_commit(r, "HEAD", cfg(("unit", f"echo other >> {marker}")), key="t")
    assert not fourth.cached


def test_no_config_is_unverified(r: Repository) -> None:
    rec = verify_commit(r, "HEAD", None, key="t")
    assert rec.verdict == Verdict.UNVERIFIED and rec.lanes == ()


def test_stop_before_start_runs_nothing(r: Repository, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    stop = threading.Event()
    stop.set()
    rec = verify_commit(r, "HEAD", cfg(("unit", f"touch {marker}")), key="t", stop=stop)
    assert rec.verdict == Verdict.INTERRUPTED
    assert rec.lanes[0].runs == ()
    assert not marker.exists()


@pytest.mark.usefixtures("unboxed")  # its verifier writes down its pids
def test_stop_during_run_kills_everything_and_is_not_rerun(r: Repository, tmp_path: Path) -> None:
    pidfile = tmp_path / "pids"
    stop = threading.Event()
    cmd = f"{PY} {FAKES / 'verify_stubborn.py'} {pidfile}"
    box: list[VerifyRecord] = []
    t = threading.Thread(
        target=lambda: box.append(
            verify_commit(r, "HEAD", cfg(("slow", cmd), ("quick", "true")), key="t", stop=stop)
        ),
        daemon=True,
    )
    t.start()
    wait_for(pidfile.exists, what="the verifier's pid file")
    pids = [int(p) for p in pidfile.read_text().split()]
    stop.set()
    t.join(30)
    (rec,) = box
    assert not any(running(p) for p in pids)
    assert rec.verdict == Verdict.INTERRUPTED
    slow = next(lane for lane in rec.lanes if lane.name == "slow")
    assert slow.verdict == Verdict.INTERRUPTED and len(slow.runs) == 1
    assert "sent KILL" in Path(slow.runs[0].log).read_text()
    assert cached_verdict(r, rec.tree, cfg(("slow", cmd), ("quick", "true"))) is None


def test_timeout_is_a_failure(r: Repository) -> None:
    rec = verify_commit(r, "HEAD", cfg(("unit", "sleep 30"), reruns=0, timeout=0.3), key="t")
    assert rec.verdict == Verdict.FAIL
    assert rec.lanes[0].runs[0].timed_out


def test_checkout_moves_between_commits(r: Repository, repo: Path, tmp_path: Path) -> None:
    out = tmp_path / "value"
    config = cfg(("unit", f"cat src/app.py > {out}"))
    verify_commit(r, "HEAD", config, key="t")
    assert out.read_text() == "VALUE = 1\n"
    (repo / "src" / "app.py").write_text("VALUE = 2\n")
    subprocess.run(["git", "commit", "-qam", "two"], cwd=repo, check=True)
    verify_commit(r, "HEAD", config, key="t")
    assert out.read_text() == "VALUE = 2\n"


def test_record_round_trips(r: Repository) -> None:
    rec = verify_commit(r, "HEAD", cfg(("unit", "true")), key="t")
    assert VerifyRecord.from_dict(rec.to_dict()) == rec
