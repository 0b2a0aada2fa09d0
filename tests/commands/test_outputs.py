"""Output goes only where a file belongs, through the real CLI: `forge report -o`
refuses a directory, device or FIFO and leaves it as it was; a write error is one
line; a closed or broken standard output ends a command without a traceback."""

from __future__ import annotations

import os
import socket
import stat
import subprocess
from pathlib import Path

import pytest
from helpers.gitkit import forge_cmd, run_forge
from helpers.runkit import plan_and_run, write_plan

ONE = '[[task]]\nid = "a"\nrun = "echo a > a.txt"\nfiles = ["a.txt"]\n'


@pytest.fixture
def ran(repo: Path, tmp_path: Path) -> Path:
    assert plan_and_run(repo, write_plan(tmp_path, ONE)).returncode == 0
    return repo


def _refused(cp: subprocess.CompletedProcess[str], what: str) -> None:
    assert cp.returncode == 2, cp.stdout + cp.stderr
    assert cp.stderr.count("\n") == 1 and cp.stderr.startswith("forge: "), cp.stderr
    assert what in cp.stderr and "Traceback" not in cp.stderr


def test_report_writes_a_regular_file(ran: Path, tmp_path: Path) -> None:
    out = tmp_path / "pages" / "r.html"
    cp = run_forge(ran, "report", "-o", str(out))
    assert cp.returncode == 0, cp.stderr
    assert stat.S_ISREG(out.stat().st_mode) and "<html" in out.read_text().lower()
    assert [p.name for p in out.parent.iterdir()] == ["r.html"]  # no temp file left


def test_report_refuses_a_directory_and_leaves_it(ran: Path, tmp_path: Path) -> None:
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "keep").write_text("x")
    _refused(run_forge(ran, "report", "-o", str(folder)), "is a directory")
    assert sorted(p.name for p in folder.iterdir()) == ["keep"]


def test_report_refuses_a_device_fifo_and_socket(ran: Path, tmp_path: Path) -> None:
    _refused(run_forge(ran, "report", "-o", "/dev/null"), "is a character device")
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    _refused(run_forge(ran, "report", "-o", str(fifo)), "is a FIFO")
    assert stat.S_ISFIFO(fifo.stat().st_mode)
    sock_path = tmp_path / "s.sock"
    sock = socket.socket(socket.AF_UNIX)
    try:
        sock.bind(str(sock_path))
        _refused(run_forge(ran, "report", "-o", str(sock_path)), "is a socket")
    finally:
        sock.close()
    link = tmp_path / "to-null"
    link.symlink_to("/dev/null")
    _refused(run_forge(ran, "report", "-o", str(link)), "is a character device")
    assert link.is_symlink()


def test_a_write_error_is_one_line(ran: Path) -> None:
    # /proc takes no new file, even from root: a write error forge did not foresee
    cp = run_forge(ran, "report", "-o", "/proc/forge-report.html")
    assert cp.returncode != 0 and "Traceback" not in cp.stderr, cp.stderr
    assert cp.stderr.count("\n") == 1 and cp.stderr.startswith("forge: cannot write "), cp.stderr


def test_a_closed_stdout_is_no_traceback(ran: Path) -> None:
    import shlex

    cmd = " ".join(shlex.quote(a) for a in forge_cmd("status", "--json"))
    cp = subprocess.run(
        ["sh", "-c", f"exec {cmd} >&-"], cwd=ran, capture_output=True, text=True, timeout=60
    )
    assert cp.returncode == 0, cp.stderr
    assert cp.stderr == ""


def test_a_broken_pipe_ends_quietly(ran: Path) -> None:
    for args in (("status",), ("status", "--json"), ("--help",)):
        r, w = os.pipe()
        os.close(r)  # the reader is gone before forge writes a byte
        try:
            cp = subprocess.run(
                forge_cmd(*args), cwd=ran, stdout=w, stderr=subprocess.PIPE, text=True, timeout=60
            )
        finally:
            os.close(w)
        assert cp.returncode == 0, cp.stderr
        assert cp.stderr == "", cp.stderr
