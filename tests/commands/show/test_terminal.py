"""Task text is data: on a terminal, markup and control sequences from a task's
output are shown literally and never reach the terminal as commands."""

from __future__ import annotations

import os
import pty
import select
import subprocess
from pathlib import Path

from helpers.gitkit import forge_cmd, run_forge
from helpers.runkit import write_plan

# What a task prints, and so what its failure reason holds.
NASTY = r"x [/usr/lib/python3] [/] [bold]x[/bold] \033]0;TITLE\007 \033[2J end"

PLAN = f"""
[[task]]
id = "bad"
run = '''printf '{NASTY}\\n'; exit 3'''
files = ["bad.txt"]

[[task]]
id = "good"
run = '''printf '{NASTY}\\n' > good.txt'''
files = ["good.txt"]
"""


def on_terminal(cwd: Path, *args: str, timeout: float = 60) -> tuple[int, bytes]:
    """Run the real CLI with a pseudo-terminal as stdout and stderr: its exit code and
    every byte it wrote to the terminal."""
    master, slave = pty.openpty()
    env = {**os.environ, "TERM": "xterm-256color"}
    child = subprocess.Popen(
        forge_cmd(*args), cwd=cwd, stdin=subprocess.DEVNULL, stdout=slave, stderr=slave, env=env
    )
    os.close(slave)
    out = bytearray()
    while True:
        ready, _, _ = select.select([master], [], [], timeout)
        if not ready:
            child.kill()
            raise AssertionError(f"no output for {timeout}s: {bytes(out)!r}")
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child side is closed
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    return child.wait(timeout=timeout), bytes(out)


def _no_task_control(out: bytes) -> None:
    assert b"\x1b]0;TITLE" not in out and b"\x07" not in out
    assert b"\x1b[2J" not in out


def test_run_and_status_on_a_terminal_show_task_text_literally(repo: Path, tmp_path: Path) -> None:
    assert run_forge(repo, "plan", str(write_plan(tmp_path, PLAN))).returncode == 0
    code, out = on_terminal(repo, "run")
    text = out.decode(errors="replace")
    assert code == 5, text  # `bad` failed; the run went to its end
    assert "MarkupError" not in text and "Traceback" not in text
    assert "[/usr/lib/python3] [/] [bold]x[/bold]" in text
    assert "^[]0;TITLE^G" in text and "^[[2J" in text
    assert "verification:" in text  # the report after the live view was printed
    _no_task_control(out)

    code, out = on_terminal(repo, "status")
    text = out.decode(errors="replace")
    assert code == 0, text
    assert "[/usr/lib/python3] [/] [bold]x[/bold] ^[]0;TITLE^G ^[[2J end" in text
    _no_task_control(out)


def test_logs_on_disk_stay_raw(repo: Path, tmp_path: Path) -> None:
    assert run_forge(repo, "plan", str(write_plan(tmp_path, PLAN))).returncode == 0
    assert run_forge(repo, "run").returncode == 5
    logs = list((repo / ".git/forge/plans/p/logs/bad").rglob("agent.log"))
    assert b"\x1b]0;TITLE\x07" in logs[0].read_bytes()
    assert (repo / ".git/forge").exists()
