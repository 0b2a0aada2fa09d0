"""cgroup v2 containment of commands: real where the hierarchy is delegated to us,
otherwise detection (saying why) and the pieces that need no kernel support."""

from __future__ import annotations

import os
import subprocess
import threading
from pathlib import Path

import pytest

from forge.base import cgroups, procgroup


def test_detection_names_why_cgroups_are_not_used(tmp_path: Path) -> None:
    assert cgroups._probe(tmp_path) == (None, "no cgroup v2 hierarchy at /sys/fs/cgroup")
    if cgroups.delegated() is None:
        why = cgroups.why_not()
        assert why
        print(f"cgroups not used here: {why}")


def test_a_wrapped_command_moves_itself_into_the_group_before_it_runs(tmp_path: Path) -> None:
    group = cgroups.Group(tmp_path)
    (tmp_path / "cgroup.procs").write_text("")
    cp = subprocess.run(group.wrap(["sh", "-c", "echo $$"]), capture_output=True, text=True)
    assert cp.returncode == 0
    assert group.pids() == [int(cp.stdout)], "the exec'd command is the pid moved in"


@pytest.mark.skipif(cgroups.delegated() is None, reason=f"cgroups: {cgroups.why_not()}")
def test_a_daemon_that_leaves_everything_behind_is_killed(tmp_path: Path) -> None:
    mark = "31999"
    res = procgroup.run_group(
        procgroup.GroupSpec(
            f"cd / && setsid -f env -i sleep {mark} > /dev/null 2>&1",
            cwd=tmp_path,
            log_path=tmp_path / "log",
            tag="cgroup-test",
        ),
        stop=threading.Event(),
    )
    assert res.returncode == 0
    left = [
        pid
        for pid in filter(str.isdigit, os.listdir("/proc"))
        if Path(f"/proc/{pid}/cmdline").exists()
        and Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[:2] == [b"sleep", mark.encode()]
    ]
    assert not left
