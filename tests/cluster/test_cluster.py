"""`forge run --cluster`: attempts on Dask workers (real processes over loopback),
state, merges and verification here."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers.gitkit import FAKES, git, run_forge
from helpers.runkit import alive, merge_count, spawn_forge, state, statuses, tagged, wait_for

pytest.importorskip("distributed")

PY = sys.executable

PLAN = f"""
verify = "test -f README.md"

[agents.fake]
command = ["{PY}", "{FAKES}/agent_edit.py", "x.txt"]
models = ["m"]

[[task]]
id = "a"
run = "echo a > a.txt"
files = ["a.txt"]

[[task]]
id = "b"
prompt = "edit x.txt"
agent = "fake"
files = ["x.txt"]
check = "test -f x.txt"

[[task]]
id = "c"
run = "cat a.txt > c.txt"
files = ["c.txt"]
deps = ["a"]
"""


def _copy(repo: Path, to: Path) -> Path:
    git(repo.parent, "clone", "-q", str(repo), str(to))
    return to


def _plan(repo: Path, body: str) -> None:
    (repo.parent / "p.toml").write_text('name = "p"\n' + body)
    cp = run_forge(repo, "plan", str(repo.parent / "p.toml"))
    assert cp.returncode == 0, cp.stderr


@pytest.mark.slow
def test_a_cluster_run_lands_what_a_local_run_lands(repo: Path, tmp_path: Path) -> None:
    local = _copy(repo, tmp_path / "local")
    for where in (repo, local):
        _plan(where, PLAN)
    cp = run_forge(repo, "run", "--cluster", "local:2")
    assert cp.returncode == 0, cp.stdout + cp.stderr
    here = run_forge(local, "run")
    assert here.returncode == 0, here.stdout + here.stderr
    tree = "forge/p-integration^{tree}"
    assert git(repo, "rev-parse", tree) == git(local, "rev-parse", tree)
    assert statuses(repo) == {"a": "MERGED", "b": "MERGED", "c": "MERGED"}
    attempts = [a for t in state(repo)["tasks"].values() for a in t["attempts"]]
    assert all(a["where"] and "tls://127.0.0.1" in a["where"] for a in attempts)
    assert "PASS" in cp.stdout
    # The local bare remote is removed with the cluster; no result refs are left.
    assert not list((repo / ".git" / "forge" / "cluster").glob("*.git"))
    assert git(repo, "for-each-ref", "refs/forge/results") == ""
    history = run_forge(repo, "status", "b", "--plan", "p")
    assert "where" in history.stdout and "tls://127.0.0.1" in history.stdout
    # The workers' mirror and slots stay for the next run, beside the plan's slots,
    # until `forge clean`.
    cache = Path(os.environ["FORGE_WORKTREES"]) / "repo" / "p" / ".cluster"
    assert (cache / next(cache.iterdir()).name / "mirror.git").is_dir()
    cleaned = run_forge(repo, "clean", "p")
    assert cleaned.returncode == 0, cleaned.stderr
    assert not cache.exists()


def test_a_bad_cluster_address_changes_nothing(repo: Path) -> None:
    _plan(repo, PLAN)
    cp = run_forge(repo, "run", "--cluster", "local:zero")
    assert cp.returncode == 2
    assert "local:N" in cp.stderr and "Traceback" not in cp.stderr
    assert git(repo, "for-each-ref", "refs/heads/forge") == ""


def test_a_scheduler_elsewhere_without_a_remote_names_the_key(repo: Path) -> None:
    _plan(repo, PLAN)
    # 192.0.2.1 (TEST-NET-1) is no address of this machine: refused before anything
    # is reached or started.
    cp = run_forge(repo, "run", "--cluster", "tcp://192.0.2.1:8786")
    assert cp.returncode == 2, cp.stdout + cp.stderr
    err = cp.stderr.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert "[cluster] remote = " in err and "forge.toml" in err
    assert git(repo, "for-each-ref", "refs/heads/forge") == ""


def test_the_readme_one_liner_with_a_scheduler_on_this_machine(repo: Path, tmp_path: Path) -> None:
    """`forge run PLAN --cluster tcp://host:8786` with only `insecure = true` in
    forge.toml: the scheduler is here, so its workers get the repository as local:N
    workers do."""
    (repo / "forge.toml").write_text("[cluster]\ninsecure = true\n")
    _plan(repo, '[[task]]\nid = "s"\nrun = "echo s > s.txt"\nfiles = ["s.txt"]\n')
    sched, worker, address = _scheduler(tmp_path)
    try:
        cp = run_forge(repo, "run", "p", "--cluster", address)
    finally:
        for proc in (sched, worker):
            proc.kill()
            proc.wait()
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert statuses(repo)["s"] == "MERGED"
    attempts = state(repo)["tasks"]["s"]["attempts"]
    assert attempts and attempts[-1]["where"]


BLOCKING = """
[[task]]
id = "slow"
run = "echo $$ > {pids}/slow.pid; {py} {fakes}/verify_stubborn.py {pids}/slow"
files = ["slow.txt"]
"""


@pytest.mark.slow
def test_sigint_stops_the_attempts_on_every_worker(repo: Path, tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    pids.mkdir()
    _plan(repo, BLOCKING.format(pids=pids, py=PY, fakes=FAKES))
    run = spawn_forge(repo, "run", "--cluster", "local:2")
    try:
        wait_for(lambda: (pids / "slow.pid").exists(), timeout=60, what="the remote task")
        wait_for(lambda: bool(tagged("p/slow/")), what="its processes")
        run.send_signal(signal.SIGINT)
        out, _ = run.communicate(timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 130, out
    wait_for(lambda: not tagged("p/slow/"), timeout=10, what="no process left on the workers")
    assert statuses(repo)["slow"] == "INTERRUPTED"


@pytest.mark.slow
@pytest.mark.usefixtures("unboxed")  # it writes down `$PPID`: the worker, on the machine
def test_a_worker_killed_mid_task_costs_no_attempt_and_lands_once(
    repo: Path, tmp_path: Path
) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    # The first time it runs it records its worker and blocks; the second time it
    # finishes at once.
    script = (
        f"if [ -e {marks}/ran ]; then echo done > w.txt; "
        f"else touch {marks}/ran; echo $PPID > {marks}/worker; exec sleep 600; fi"
    )
    _plan(repo, f'[[task]]\nid = "w"\nrun = "{script}"\nfiles = ["w.txt"]\n')
    run = spawn_forge(repo, "run", "--cluster", "local:2")
    try:
        wait_for(lambda: (marks / "worker").exists(), timeout=60, what="the first attempt")
        worker = int((marks / "worker").read_text())
        os.kill(worker, signal.SIGKILL)
        out, _ = run.communicate(timeout=120)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 0, out
    ts = state(repo)["tasks"]["w"]
    assert ts["status"] == "MERGED"
    assert [a["status"] for a in ts["attempts"]] == ["INFRA", "MERGED"]
    lost, landed = ts["attempts"]
    assert "lost mid-attempt" in lost["reason"]
    # Named by the worker that died, not by the one that found it gone.
    assert lost["where"] and lost["where"] != landed["where"]
    assert lost["where"].split()[-1] in lost["reason"]
    assert merge_count(repo, "w") == 1
    wait_for(lambda: not tagged("p/w/"), timeout=10, what="the dead worker's processes stopped")


def _scheduler(tmp_path: Path) -> tuple[subprocess.Popen[bytes], subprocess.Popen[bytes], str]:
    info = tmp_path / "scheduler.json"
    quiet = subprocess.DEVNULL
    scheduler_args = ["--scheduler-file", str(info), "--port", "0", "--no-dashboard"]
    sched = subprocess.Popen(
        [PY, "-m", "distributed.cli.dask_scheduler", *scheduler_args], stdout=quiet, stderr=quiet
    )
    wait_for(lambda: info.exists() and info.stat().st_size > 0, timeout=60, what="the scheduler")
    worker_args = ["--scheduler-file", str(info), "--nthreads", "1", "--no-dashboard"]
    worker = subprocess.Popen(
        [PY, "-m", "distributed.cli.dask_worker", *worker_args, "--no-nanny"],
        stdout=quiet,
        stderr=quiet,
    )
    return sched, worker, str(json.loads(info.read_text())["address"])


def test_losing_the_scheduler_pauses_the_run_and_it_resumes_here(
    repo: Path, tmp_path: Path
) -> None:
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    (repo / "forge.toml").write_text(f'[cluster]\nremote = "{remote}"\ninsecure = true\n')
    git(repo, "add", "forge.toml")
    git(repo, "commit", "-q", "-m", "cluster config")
    marks = tmp_path / "marks"
    marks.mkdir()
    script = (
        f"if [ -e {marks}/ran ]; then echo done > s.txt; else touch {marks}/ran; exec sleep 600; fi"
    )
    _plan(repo, f'[[task]]\nid = "s"\nrun = "{script}"\nfiles = ["s.txt"]\n')
    sched, worker, address = _scheduler(tmp_path)
    try:
        run = spawn_forge(repo, "run", "--cluster", address)
        wait_for(lambda: (marks / "ran").exists(), timeout=60, what="the remote attempt")
        started = time.monotonic()
        sched.kill()
        out, _ = run.communicate(timeout=60)
        assert run.returncode == 8, out
        assert time.monotonic() - started < 30
        assert "scheduler" in out
        assert statuses(repo)["s"] == "INTERRUPTED"
        # The worker lost its scheduler too: it stops the attempt it was running.
        wait_for(lambda: not tagged("p/s/"), timeout=30, what="the orphaned attempt stopped")
    finally:
        for p in (sched, worker):
            if p.poll() is None:
                p.kill()
            p.wait()
    again = run_forge(repo, "run")
    assert again.returncode == 0, again.stdout + again.stderr
    assert statuses(repo)["s"] == "MERGED"
    assert merge_count(repo, "s") == 1


def test_cluster_without_dask_says_how_to_install(repo: Path, tmp_path: Path) -> None:
    _plan(repo, PLAN)
    shadow = tmp_path / "shadow"
    (shadow / "distributed").mkdir(parents=True)
    (shadow / "distributed" / "__init__.py").write_text("raise ImportError('no dask here')\n")
    env = dict(os.environ, PYTHONPATH=f"{shadow}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    cp = subprocess.run(
        [PY, "-m", "forge", "run", "--cluster", "local:1"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert cp.returncode == 2
    assert "pip install 'forge[cluster]'" in cp.stderr
    assert alive(os.getpid())


def test_a_cluster_attempt_reads_an_outage_after_its_timeout(repo: Path) -> None:
    # Codex reconnecting until forge's timeout: INFRA on a worker too, not TIMEOUT.
    replay = [PY, str(FAKES / "agent_replay.py"), "codex-offline.log", "--hang"]
    _plan(
        repo,
        f'agent = "codex"\ntimeout = "1s"\n[agents.codex]\ncommand = {json.dumps(replay)}\n'
        '[[task]]\nid = "t"\nprompt = "do it"\nfiles = ["x.txt"]\n',
    )
    cp = run_forge(repo, "run", "--cluster", "local:1", "--infra-retries", "0")
    assert cp.returncode == 8, cp.stdout + cp.stderr
    [only] = state(repo)["tasks"]["t"]["attempts"]
    assert only["status"] == "INFRA" and only["reason"].startswith("network: Reconnecting")


def test_a_worker_applies_the_plans_env_and_time_limits(repo: Path) -> None:
    body = (
        'timeout = "4s"\n'
        'env = { WHERE = "{worktree}" }\n'
        '[[task]]\nid = "e"\nrun = "echo $WHERE > e.txt"\nfiles = ["e.txt"]\n'
        'check = "sleep 30"\n'
    )
    _plan(repo, body)
    started = time.monotonic()
    cp = run_forge(repo, "run", "--cluster", "local:1")
    assert cp.returncode == 5, cp.stdout + cp.stderr
    assert time.monotonic() - started < 25, "the check's time limit held on the worker"
    ts = state(repo)["tasks"]["e"]
    assert ts["status"] == "TIMEOUT"
    assert "check timed out" in ts["reason"]
    # `{worktree}` is the worker's own slot, not a path of this machine's slots.
    where = git(repo, "show", "forge/p/e:e.txt")
    assert "/.cluster/" in where and "/slots/slot-" in where
