"""Process groups: run, time out, stop, and leave nothing behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.runkit import alive as running
from helpers.runkit import wait_for

from forge.base import box, procgroup

FAKES = Path(__file__).resolve().parents[1] / "fakes"
STUBBORN = FAKES / "verify_stubborn.py"


def read_pids(path: Path) -> list[int]:
    wait_for(path.exists, what=f"pid file {path}")
    return [int(x) for x in path.read_text().split()]


@pytest.fixture(autouse=True, scope="module")
def subreaper() -> None:
    # Orphaned grandchildren then become our children, and their zombies get reaped.
    assert box.become_subreaper()


@pytest.fixture
def tag(request: pytest.FixtureRequest) -> Iterator[str]:
    """A tag for the test's processes; whatever a failing test leaves is killed."""
    name = f"t-{request.node.name}-{os.getpid()}"
    yield name
    procgroup.stop_group(0, grace=0, tag=name)


def test_run_group_exit_code_and_log(tmp_path: Path) -> None:
    log = tmp_path / "out.log"
    starts: list[int] = []
    res = procgroup.run_group(
        procgroup.GroupSpec(
            "echo hello; echo oops >&2; exit 3",
            cwd=tmp_path,
            log_path=log,
            tag=f"t-basic-{os.getpid()}",
        ),
        on_start=starts.append,
    )
    assert res.returncode == 3
    assert not res.timed_out and not res.stopped
    assert starts == [res.pgid] and res.pgid > 0
    assert "hello" in log.read_text() and "oops" in log.read_text()


def test_env_is_cleaned_and_tagged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GIT_DIR", "/nowhere")
    log = tmp_path / "env.log"
    procgroup.run_group(
        procgroup.GroupSpec(
            'echo "dir=${GIT_DIR-unset} tag=$FORGE_PROC_TAG x=$X"',
            cwd=tmp_path,
            log_path=log,
            env={"X": "1"},
            tag=f"t-env-{os.getpid()}",
        )
    )
    assert f"dir=unset tag=t-env-{os.getpid()} x=1" in log.read_text()


def test_input_path_feeds_stdin(tmp_path: Path) -> None:
    (tmp_path / "in.txt").write_text("from a file\n")
    log = tmp_path / "in.log"
    procgroup.run_group(
        procgroup.GroupSpec(["cat"], cwd=tmp_path, log_path=log, input_path=tmp_path / "in.txt")
    )
    assert "from a file" in log.read_text()


def test_missing_binary_is_127(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    res = procgroup.run_group(
        procgroup.GroupSpec(["no-such-binary-forge"], cwd=tmp_path, log_path=log)
    )
    assert res.returncode == 127 and res.pgid == 0
    assert "cannot run `no-such-binary-forge`" in log.read_text()


def test_timeout_kills_stubborn_group_with_grandchildren(tmp_path: Path, tag: str) -> None:
    pidfile = tmp_path / "pids"
    log = tmp_path / "t.log"
    box: list[procgroup.GroupResult] = []
    t = threading.Thread(
        daemon=True,
        target=lambda: box.append(
            procgroup.run_group(
                procgroup.GroupSpec(
                    [sys.executable, str(STUBBORN), str(pidfile)],
                    cwd=tmp_path,
                    log_path=log,
                    # Past the four Python starts the verifier makes before it
                    # writes its pids (slow under coverage on a loaded machine).
                    timeout=4.0,
                    grace=0.3,
                    tag=tag,
                )
            )
        ),
    )
    t.start()
    pids = read_pids(pidfile)
    t.join(30)
    (res,) = box
    assert res.timed_out and not res.stopped
    assert res.returncode == -signal.SIGKILL
    assert not any(running(p) for p in pids)
    text = log.read_text()
    assert "timed out" in text
    assert f"sent TERM to group {res.pgid}" in text
    assert f"sent KILL to group {res.pgid}" in text


def test_stop_event_stops_group(tmp_path: Path, tag: str) -> None:
    pidfile = tmp_path / "pids"
    stop = threading.Event()
    box: list[procgroup.GroupResult] = []
    t = threading.Thread(
        daemon=True,
        target=lambda: box.append(
            procgroup.run_group(
                procgroup.GroupSpec(
                    [sys.executable, str(STUBBORN), str(pidfile)],
                    cwd=tmp_path,
                    log_path=tmp_path / "s.log",
                    grace=0.3,
                    tag=tag,
                ),
                stop=stop,
            )
        ),
    )
    t.start()
    pids = read_pids(pidfile)
    assert all(running(p) for p in pids)
    stop.set()
    t.join(30)
    (res,) = box
    assert res.stopped and not res.timed_out
    assert not any(running(p) for p in pids)
    assert not procgroup.group_alive(res.pgid)


def test_polite_group_stops_on_term_without_kill(tmp_path: Path, tag: str) -> None:
    stop = threading.Event()
    log = tmp_path / "p.log"
    marker = tmp_path / "started"
    box: list[procgroup.GroupResult] = []
    t = threading.Thread(
        daemon=True,
        target=lambda: box.append(
            procgroup.run_group(
                procgroup.GroupSpec(
                    f"touch {marker}; sleep 60 & sleep 60; wait",
                    cwd=tmp_path,
                    log_path=log,
                    grace=5,
                    tag=tag,
                ),
                stop=stop,
            )
        ),
    )
    t.start()
    wait_for(marker.exists)
    stop.set()
    t.join(30)
    assert box[0].stopped
    assert "sent KILL" not in log.read_text()
    assert not procgroup.group_alive(box[0].pgid)


def test_leader_exit_leaves_no_daemon(tmp_path: Path, tag: str) -> None:
    log = tmp_path / "d.log"
    pidfile = tmp_path / "daemon.pid"
    res = procgroup.run_group(
        procgroup.GroupSpec(
            f"sleep 60 & echo $! > {pidfile}; exit 0", cwd=tmp_path, log_path=log, grace=1, tag=tag
        )
    )
    assert res.returncode == 0
    pid = int(pidfile.read_text())
    assert not running(pid)
    assert "left processes behind" in log.read_text()


def test_setsid_escapee_is_found_by_tag(tmp_path: Path) -> None:
    pidfile = tmp_path / "pids"
    tag = f"t-escape-{os.getpid()}"  # this run's own: suites run side by side
    stop = threading.Event()
    box: list[procgroup.GroupResult] = []
    t = threading.Thread(
        daemon=True,
        target=lambda: box.append(
            procgroup.run_group(
                procgroup.GroupSpec(
                    [sys.executable, str(STUBBORN), str(pidfile), "--escape"],
                    cwd=tmp_path,
                    log_path=tmp_path / "e.log",
                    grace=0.3,
                    tag=tag,
                ),
                stop=stop,
            )
        ),
    )
    t.start()
    pids = read_pids(pidfile)
    escapee = pids[2]
    assert os.getpgid(escapee) != os.getpgid(pids[0])
    assert escapee in procgroup.find_tagged(tag)
    stop.set()
    t.join(30)
    assert not any(running(p) for p in pids)
    assert procgroup.find_tagged(tag) == []


def test_stop_group_of_foreign_group(tmp_path: Path) -> None:
    """stop_group on a group another thread's Popen does not own (crash recovery)."""
    pidfile = tmp_path / "pids"
    tag = f"t-foreign-{os.getpid()}"  # this run's own: suites run side by side
    child = subprocess.Popen(
        [sys.executable, str(STUBBORN), str(pidfile)],
        start_new_session=True,
        env={**os.environ, procgroup.TAG_VAR: tag},
    )
    pids = read_pids(pidfile)
    lines: list[str] = []
    wait_for(lambda: set(pids) <= set(procgroup.find_tagged(tag)), what="tagged pids")
    assert procgroup.group_alive(child.pid)
    procgroup.stop_group(child.pid, grace=0.3, tag=tag, log=lines.append)
    assert not any(running(p) for p in pids)
    assert not procgroup.group_alive(child.pid)
    assert any("sent TERM" in line for line in lines)
    assert any("sent KILL" in line for line in lines)
    child.wait(5)


def test_parallel_groups_keep_their_own_exit_codes(tmp_path: Path) -> None:
    results: dict[int, procgroup.GroupResult] = {}
    stop = threading.Event()

    def one(i: int) -> None:
        results[i] = procgroup.run_group(
            procgroup.GroupSpec(
                f"sleep 0.{i}; exit {i}", cwd=tmp_path, log_path=tmp_path / f"{i}.log"
            ),
            stop=stop if i == 0 else None,
        )

    threads = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(1, 6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert {i: r.returncode for i, r in results.items()} == {i: i for i in range(1, 6)}
