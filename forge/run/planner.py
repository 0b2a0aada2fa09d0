"""One try of a planner (`forge draft`): the agent in a checkout of the base made for
it, through the work step every task's attempt runs (forge.run.attempt.work: its
process group, time limit, log, usage and infrastructure failures, the sandbox when
asked). What it changes in that checkout is discarded with the checkout; its answer
is the file named by FORGE_PLAN_FILE, or the TOML block it printed."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import threading
import time
from collections.abc import Mapping
from contextlib import AbstractContextManager
from dataclasses import replace
from pathlib import Path

from forge.base import logs, procgroup
from forge.base.liveness import Owner
from forge.errors import ForgeError
from forge.frozen import frozen
from forge.git import worktrees
from forge.git.repo import Repository
from forge.run.attempt.confinement import run_contained, sandbox_for
from forge.run.attempt.context import Command, Outcome
from forge.run.attempt.order import WorkOrder
from forge.run.attempt.work import run_work
from forge.run.state import events as ev
from forge.run.state.folders import agent_state_dir
from forge.run.state.run_state import Attempt
from forge.run.state.store import record_attempt

TASK = "draft"  # the task name a planner is told ({task}, FORGE_TASK)


@frozen
class Try:
    """What one try of the planner came to."""

    number: int
    spec: str  # the planner's spec as it ran
    answer: str | None  # the plan it gave (TOML text), None: none
    failure: Outcome | None  # how the run ended when not well (INFRA, FAILED, TIMEOUT, ...)
    changed: tuple[str, ...]  # what it changed in its checkout (discarded)
    read_only: bool
    log: Path
    answered_in: Path  # the file its answer is in (FORGE_PLAN_FILE, else its log)
    attempt: Attempt  # usage, cost and models, as for a task's attempt


@frozen
class Planner:
    """How every try of one draft runs."""

    repo: Repository
    name: str  # the plan's name (logs, tags, the agents' state folder)
    spec: str
    defs: Mapping[str, Mapping[str, object]]
    base: str  # the commit the checkout holds
    logs: Path  # the draft's log folder; each try a folder in it
    timeout: float
    sandbox: bool
    stop: threading.Event


class DraftPlace:
    """The checkout a planner runs in, as the Place of forge's work step: commands
    run there, in a process group of their own, under the sandbox when asked."""

    def __init__(self, planner: Planner, slot: Path, logs: Path, attempt: Attempt) -> None:
        self.planner = planner
        self.slot = slot
        self.logs = logs
        self.state_dir = agent_state_dir(planner.repo, planner.name)
        self.stop = planner.stop
        self.sandboxed = planner.sandbox
        self._attempt = attempt

    def group(self, command: Command) -> procgroup.GroupResult:
        p, c = self.planner, command

        def started(pgid: int) -> None:
            self.record(ev.ProcessGroup("", self._attempt.number, pgid))

        # The try's folder holds FORGE_PLAN_FILE; its parent is named as the plan,
        # whose agents' state folder the sandbox lets the planner write too.
        sandbox = sandbox_for(p.repo, self.logs, self.slot, writable=(self.logs,))
        spec = procgroup.GroupSpec(
            c.argv,
            cwd=self.slot,
            log_path=c.log,
            env={**p.repo.settings.child_env(), **c.env},
            timeout=c.timeout,
            grace=p.repo.settings.grace,
            tag=self._attempt.tag,
            input_path=c.input_path,
            sandbox=sandbox if p.sandbox else None,
        )
        stop = self.stop if c.stop is None else c.stop
        return run_contained(p.repo, spec, stop=stop, on_start=started)

    def phase(self, name: str, *, save: bool = False) -> AbstractContextManager[object]:
        del name, save  # a try is no task's attempt: no phases recorded
        return contextlib.nullcontext()

    def set_up(self) -> None:
        pass  # a planner's checkout runs no setup

    # The work step alone runs here: a planner's checkout is never committed, and
    # what it changed is discarded with it.
    def commit(self, message: str) -> str:
        del message
        raise ForgeError("a planner's checkout is never committed")

    def shares_history(self, base: str, head: str) -> bool:
        del base, head
        return False

    def changed(self, base: str, head: str) -> list[str]:
        del base, head
        return []

    def tree(self, commit: str) -> str:
        return self.planner.repo.tree_of(commit)

    def restore(self) -> None:
        pass

    def warn(self, message: str) -> None:
        del message

    def saved(self) -> None:
        pass

    def record(self, event: ev.Event) -> None:
        record_attempt(self._attempt, event)


def run_try(planner: Planner, number: int, prompt: str) -> Try:
    """Run the planner once on `prompt` in a new checkout of the base, removed after."""
    from forge.agents import spec as agents
    from forge.agents.planners import answer_in_output, as_planner

    defn, spec = agents.resolve(planner.spec, planner.defs)
    defn, read_only = as_planner(defn)
    folder = planner.logs / f"try-{number}"
    folder.mkdir(parents=True, exist_ok=True)
    plan_file = folder / "plan.toml"
    # A colon is in no plan's name: no task attempt's tag (plan/task/n/pid) is this one.
    tag = f"draft:{planner.name}/{number}/{os.getpid()}/{time.time_ns()}"
    attempt = Attempt(number=number, agent=str(spec), model=spec.model, effort=spec.effort, tag=tag)
    me = Owner.me()
    drafts = planner.repo.worktrees_root() / ".drafts"
    _sweep(planner.repo, drafts)
    slot = drafts / f"{planner.name}-{me.pid}-{me.start}"
    worktrees.add(planner.repo, slot, planner.base, what="planner's checkout", stop=planner.stop)
    try:
        order = WorkOrder(
            task=TASK,
            number=number,
            told=number,
            base=planner.base,
            message="",
            files=(),
            scope_warn=False,
            timeout=defn.timeout or planner.timeout,
            agent=(defn, spec),
            prompt_text=prompt,
        )
        place = DraftPlace(planner, slot, folder, attempt)
        started = time.monotonic()
        failure = run_work(order, place, attempt, {"FORGE_PLAN_FILE": str(plan_file)})
        attempt = replace(attempt, duration=round(time.monotonic() - started, 3))
        changed = tuple(worktrees.dirty_paths(slot, planner.repo))
    finally:
        worktrees.remove(planner.repo, slot)
    log = Path(attempt.log or folder / "agent.log")
    answer = _read(plan_file)
    answered_in = plan_file if answer is not None else log
    if answer is None:
        answer = answer_in_output(logs.tail(log, logs.ANALYSIS_BYTES))
    if failure is not None:
        attempt = replace(attempt, status=failure.status, reason=failure.reason)
    return Try(number, str(spec), answer, failure, changed, read_only, log, answered_in, attempt)


def forget_state(repo: Repository, name: str) -> None:
    """Remove what the planner's CLI kept of draft `name` (its home under the
    user's state folder), and the folders that held only it: a draft is recorded
    nowhere, so no `forge clean` would find it later."""
    folder = agent_state_dir(repo, name)
    shutil.rmtree(folder / TASK, ignore_errors=True)
    for empty in (folder, folder.parent, folder.parent.parent):
        try:
            empty.rmdir()
        except OSError:
            return  # not empty: a plan of that name keeps its agents' state


def _sweep(repo: Repository, drafts: Path) -> None:
    """Remove the checkouts of drafts whose forge is gone (killed mid-try)."""
    try:
        names = os.listdir(drafts)
    except OSError:
        return
    for name in names:
        m = re.search(r"-(\d+)-(\d+|None)$", name)
        if m is None:
            continue
        start = None if m.group(2) == "None" else int(m.group(2))
        if not Owner(pid=int(m.group(1)), start=start, host="").alive():
            worktrees.remove(repo, drafts / name)


def _read(path: Path) -> str | None:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    return text if text.strip() else None
