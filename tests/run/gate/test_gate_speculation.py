"""`verify_parallel = 2`: the next batch is judged on top of the running one's
candidate, in verification checkouts of its own (key `p.spec1`). Real git, the real
CLI, a verifier that logs which checkout judged which files
(tests/fakes/verify_spec.py); the reflog invariant is asserted after every run."""

from __future__ import annotations

import os
import shlex
import signal
import sys
from pathlib import Path

import pytest
from helpers.gitkit import FAKES, git, run_forge
from helpers.runkit import (
    assert_integration_verified,
    merge_count,
    plan_and_run,
    spawn_forge,
    state,
    statuses,
    wait_for,
    write_plan,
)

PY = shlex.quote(sys.executable)


def body(
    log: Path,
    ids: list[str],
    *,
    first: str,
    fail: str = "",
    verify: str = "",
    started: Path | None = None,
) -> str:
    """A plan whose task `first` lands first: the others finish only once the first
    verification (of `first` alone) has started, which `started` marks (the
    verifier's log, by default)."""
    verify = verify or f"{PY} {FAKES / 'verify_spec.py'} {log} 0.6 {fail}".strip()
    started = started or log
    out = (
        f"verify = '''{verify}'''\nverify_reruns = 0\ngate = \"queue\"\n"
        f"verify_parallel = 2\nbatch_max = 2\nmax_parallel = {len(ids)}\n"
    )
    for tid in ids:
        wait = "" if tid == first else f"while [ ! -e {started} ]; do sleep 0.01; done; "
        out += (
            f'[[task]]\nid = "{tid}"\nrun = "{wait}echo {tid} > {tid}.txt"\nfiles = ["{tid}.txt"]\n'
        )
    return out


def judged(log: Path) -> list[tuple[str, set[str]]]:
    out = []
    for line in log.read_text().splitlines():
        key, *files = line.split()
        out.append((key, set(files)))
    return out


@pytest.mark.slow
def test_speculation_lands_what_serial_verification_lands(repo: Path, tmp_path: Path) -> None:
    log = tmp_path / "log"
    ids = [f"t{i}" for i in range(6)]
    cp = plan_and_run(repo, write_plan(tmp_path, body(log, ids, first="t0")))
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert statuses(repo) == dict.fromkeys(ids, "MERGED")
    assert all(merge_count(repo, t) == 1 for t in ids)
    assert_integration_verified(repo)
    files = git(repo, "ls-tree", "--name-only", "forge/p-integration").split()
    assert {f"{t}.txt" for t in ids} <= set(files)
    runs = judged(log)
    assert any(key == "p.spec1" for key, _ in runs), runs  # a batch was judged ahead
    assert {key for key, _ in runs} <= {"p", "p.spec1"}
    assert state(repo)["verification"]["verdict"] == "PASS"


def test_a_failing_batch_throws_the_speculation_on_it_away(repo: Path, tmp_path: Path) -> None:
    log = tmp_path / "log"
    ids = ["a", "b", "c", "d"]
    cp = plan_and_run(repo, write_plan(tmp_path, body(log, ids, first="a", fail="a.txt")))
    assert cp.returncode != 0
    st = statuses(repo)
    assert st == {"a": "FAILED", "b": "MERGED", "c": "MERGED", "d": "MERGED"}, cp.stdout
    assert "breaks verification" in state(repo)["tasks"]["a"]["reason"]
    assert all(merge_count(repo, t) == 1 for t in "bcd")
    assert_integration_verified(repo)
    runs = judged(log)
    # the speculation judged work on top of the failing candidate `a` ...
    ahead = [files for key, files in runs if key == "p.spec1" and "a.txt" in files]
    assert ahead, runs
    # ... and what it judged landed only after a verification without `a`
    for files in ahead:
        rest = {f for f in files if f != "a.txt"}
        assert any(key in ("p", "p.spec1") and rest <= f and "a.txt" not in f for key, f in runs)
    assert "a.txt" not in git(repo, "ls-tree", "--name-only", "forge/p-integration").split()


@pytest.mark.usefixtures("unboxed")  # it writes down `$$`
def test_sigint_stops_both_verifications_and_lands_nothing(repo: Path, tmp_path: Path) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    # Each key's first verification hangs (its process tag names the key); later ones pass.
    hang = (
        "k=$(echo \"$FORGE_PROC_TAG\" | awk -F: '{print $(NF-1)}'); "
        f"if [ ! -f {marks}/$k ]; then echo $$ > {marks}/$k; sleep 600; fi; exit 0"
    )
    text = body(tmp_path / "log", ["a", "b", "c"], first="a", verify=hang, started=marks / "p")
    assert run_forge(repo, "plan", str(write_plan(tmp_path, text))).returncode == 0
    p = spawn_forge(repo, "run", env={"FORGE_GRACE": "0.5"})
    wait_for(lambda: {"p", "p.spec1"} <= {m.name for m in marks.iterdir()}, what="both verifying")
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 130, out + err
    for mark in marks.iterdir():  # every verification's process was stopped
        with pytest.raises(ProcessLookupError):
            os.kill(int(mark.read_text()), 0)
    assert statuses(repo) == dict.fromkeys("abc", "QUEUED")
    assert git(repo, "rev-parse", "forge/p-integration") == git(repo, "rev-parse", "main")
    cp = run_forge(repo, "run")
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert statuses(repo) == dict.fromkeys("abc", "MERGED")
    assert all(merge_count(repo, t) == 1 for t in "abc")
    assert_integration_verified(repo)
