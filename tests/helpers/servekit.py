"""Helpers for `forge serve`'s tests: a server started through the real CLI (its
address read from what it prints), and a plan of many tasks with a run state."""

from __future__ import annotations

import re
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from forge.git.refs import integration_ref
from forge.git.repo import discover
from forge.plan.registry import record
from forge.run.state.records import Phase
from forge.run.state.run_state import Attempt, RunState, Status, TaskState
from forge.run.state.store import StateStore
from helpers.runkit import spawn_forge

ADDRESS = re.compile(r"(http://\S+)")


@contextmanager
def serving(repo: Path, *args: str) -> Iterator[str]:
    """`forge serve --port 0 ARGS` in `repo`: its address (with the token, if printed),
    for the block; stopped by TERM after it, as a person's Ctrl-C would."""
    proc = spawn_forge(repo, "serve", "--port", "0", *args)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        found = ADDRESS.search(line)
        assert found, f"no address in {line!r}; stderr: {proc.stderr and proc.stderr.read()}"
        yield found.group(1)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, proc.stderr.read() if proc.stderr else ""


def many_tasks(repo: Path, tmp_path: Path, n: int, *, name: str = "big") -> StateStore:
    """A recorded plan of `n` shell tasks in waves of ten, and a run state where the
    first half merged (each with an attempt of five phases) and the rest wait."""
    lines = [f'name = "{name}"']
    for i in range(n):
        deps = f'deps = ["t{i - 10:03d}"]\n' if i >= 10 else ""
        lines.append(
            f'[[task]]\nid = "t{i:03d}"\ntitle = "Task number {i}"\n'
            f'run = "true"\nfiles = ["f{i}.txt"]\n{deps}'
        )
    plan = tmp_path / f"{name}.toml"
    plan.write_text("\n".join(lines) + "\n")
    forge_repo = discover(repo)
    record(forge_repo, plan)
    tasks = {}
    t0 = 1_700_000_000.0
    for i in range(n):
        tid = f"t{i:03d}"
        if i >= n // 2:
            tasks[tid] = TaskState(id=tid)
            continue
        start = t0 + i * 3
        log = forge_repo.state.logs_dir(name) / tid / "attempt-1" / "run.log"
        phases = [
            Phase(p, start + k, start + k + 1) for k, p in enumerate(("worktree", "run", "merge"))
        ]
        attempt = Attempt(
            number=1,
            agent="shell",
            status=Status.MERGED,
            duration=3.0,
            log=str(log),
            slot=f"slot-{i % 4}",
            phases=phases,
        )
        tasks[tid] = TaskState(id=tid, status=Status.MERGED, attempts=[attempt])
    store = StateStore(forge_repo.state, name)
    store.save(RunState(plan=name, integration=integration_ref(name), tasks=tasks))
    return store
