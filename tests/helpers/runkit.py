"""Helpers for tests that run plans end to end through the real CLI."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from helpers.gitkit import forge_cmd, git, run_forge


def write_plan(tmp: Path, body: str, *, name: str = "p") -> Path:
    path = tmp / f"{name}.toml"
    path.write_text(f'name = "{name}"\n' + body)
    return path


def plan_and_run(repo: Path, plan: Path, *args: str) -> subprocess.CompletedProcess[str]:
    cp = run_forge(repo, "plan", str(plan))
    assert cp.returncode == 0, cp.stderr
    return run_forge(repo, "run", *args)


def state(repo: Path, plan: str = "p") -> dict[str, Any]:
    """The run state as forge reads it: the snapshot with its journal replayed."""
    from forge.run.state.store import read_state

    data: dict[str, Any] = read_state(repo / ".git" / "forge" / "plans" / plan / "state.json")
    return data


def statuses(repo: Path, plan: str = "p") -> dict[str, str]:
    return {tid: t["status"] for tid, t in state(repo, plan)["tasks"].items()}


def user_view(repo: Path) -> tuple[str, str, str, bytes]:
    """What the user sees: branch, HEAD, status, and the index file itself."""
    return (
        git(repo, "symbolic-ref", "HEAD"),
        git(repo, "rev-parse", "HEAD"),
        git(repo, "status", "--porcelain", "--untracked-files=all"),
        (repo / ".git" / "index").read_bytes(),
    )


def wait_for(cond: Callable[[], bool], *, timeout: float = 30.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)  # sleep-ok: the poll interval of a wait on a condition


def spawn_forge(cwd: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        forge_cmd(*args),
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
        env={**os.environ, **(env or {})},
    )


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):  # gone while we looked
        return False
    return stat[stat.rindex(")") + 2] != "Z"


def tagged(tag_fragment: str) -> list[int]:
    """Live processes whose environment carries a FORGE_PROC_TAG containing the fragment,
    started under this test's FORGE_WORKTREES: other suites on the machine run plans
    named `p` with a task `a` too."""
    found = []
    needle = f"FORGE_PROC_TAG={tag_fragment}".encode()
    mine = f"FORGE_WORKTREES={os.environ['FORGE_WORKTREES']}".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            env = (entry / "environ").read_bytes()
        except OSError:
            continue
        if needle in env and mine in env.split(b"\0") and alive(int(entry.name)):
            found.append(int(entry.name))
    return found


def merge_count(repo: Path, task: str, plan: str = "p") -> int:
    """How many merges on the integration branch land `task` (by their trailers)."""
    fmt = "--format=%(trailers:key=Forge-Plan,valueonly,separator=)/%(trailers:key=Forge-Task,valueonly,separator=)"
    log = git(repo, "log", "--merges", fmt, f"forge/{plan}-integration")
    return sum(1 for line in log.splitlines() if line.strip() == f"{plan}/{task}")


def kill9(p: subprocess.Popen[str]) -> None:
    p.send_signal(signal.SIGKILL)
    p.wait(timeout=30)


def assert_integration_verified(repo: Path, plan: str = "p") -> int:
    """The gate's invariant: every reflog entry of the integration branch after its
    creation is a commit whose tree forge's verdict cache holds as PASS or FLAKY.
    Returns how many entries were checked."""
    entries = git(repo, "reflog", "--format=%H %gs", f"refs/heads/forge/{plan}-integration")
    lines = entries.splitlines()
    assert lines and lines[-1].endswith("forge: start integration"), lines
    verify = repo / ".git" / "forge" / "verify"
    for line in lines[:-1]:
        commit = line.split(" ", 1)[0]
        tree = git(repo, "rev-parse", f"{commit}^{{tree}}")
        hits = list((verify / "cache").glob(f"{tree}-*.json"))
        assert hits, f"integration moved to {commit[:12]} ({line}), whose tree was never passed"
        for hit in hits:
            record_id = json.loads(hit.read_text())["record"]
            record = json.loads((verify / "records" / f"{record_id}.json").read_text())
            assert record["verdict"] in ("PASS", "FLAKY"), (line, record["verdict"])
    return len(lines) - 1
