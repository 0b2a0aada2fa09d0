"""`/proc/<pid>/stat` read in one place, including command names that hold `) (`."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from forge.base.liveness import read_stat, start_time


def test_reads_this_process() -> None:
    me = read_stat(os.getpid())
    assert me is not None
    assert (me.ppid, me.pgid, me.zombie) == (os.getppid(), os.getpgid(0), False)
    assert start_time(os.getpid()) == me.start


def test_a_name_with_parentheses_and_spaces(tmp_path: Path) -> None:
    sleep = shutil.which("sleep")
    assert sleep is not None
    odd = tmp_path / "x) (y z"
    odd.symlink_to(sleep)
    child = subprocess.Popen([str(odd), "30"])
    try:
        stat = read_stat(child.pid)
        assert stat is not None and stat.ppid == os.getpid()
    finally:
        child.kill()
        child.wait()
    assert read_stat(child.pid) is None  # reaped: gone


def test_a_pid_that_does_not_exist() -> None:
    assert read_stat(2**22 + 12345) is None
