"""What every part of one run shares: the run context.

The run hands it down to its parts (the attempts, the gate, the records) and they
read it; so it sits low in run/, above the state alone, and knows nothing of how
an attempt runs (the dispatcher hands the pipeline where it runs)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from forge.agents.book import AgentBook
from forge.base.liveness import Owner
from forge.base.settings import Settings
from forge.git.gitfiles import Kept
from forge.git.repo import Repository
from forge.plan.model import Plan
from forge.plan.repo_config import RepoConfig
from forge.run.state import events as ev
from forge.run.state.run_state import RunState
from forge.run.state.slots import SlotPool
from forge.run.state.store import StateStore


class Availability(Protocol):
    """Which agents can run now: the dispatcher's per-agent bookkeeping
    (forge/run/capacity.py), as the routing of `auto` asks it."""

    @property
    def down(self) -> Mapping[str, str]:
        """The agents paused for this run, and why."""
        ...

    def usable(self, name: str) -> bool: ...


@dataclass
class RunContext:
    """What every attempt of one run shares."""

    repo: Repository
    plan: Plan
    state: RunState
    store: StateStore
    slots: SlotPool
    logs: Path
    stop: threading.Event
    agents: AgentBook  # the run's `[agents.NAME]` tables, read once
    owner: Owner  # this run's process, recorded as each task's runner
    # forge.toml as read at the run's start: an edit during the run waits for the next
    repo_config: RepoConfig
    merge_lock: threading.Lock = field(default_factory=threading.Lock)
    gated: bool = False  # finished work is QUEUED for the gate instead of merged
    on_change: Callable[[str], None] = lambda _task: None
    sandbox: bool = False  # every command under bubblewrap, only its slot writable
    # `agent = "auto"`: the run's routing, a Router of forge/run/records/routing.py (a
    # layer above this one, which narrows what it finds here)
    router: object = None
    capacity: Availability | None = None  # the dispatcher's (forge/run/capacity.py)
    # The user's git files as the run found them: what a task changes there is put back
    kept: Kept | None = None

    @property
    def settings(self) -> Settings:
        return self.repo.settings

    def save(self) -> None:
        """Fold the state into a new snapshot (forge/run/state/store.py)."""
        self.store.save(self.state)

    def record(self, *said: ev.Event, later: bool = False) -> None:
        """Record what happened through the store (forge/run/state/store.py: applied,
        and journaled now or, `later`, with the next write), then tell the live view
        of each task it concerns."""
        self.store.record(self.state, *said, later=later)
        if later:
            return
        tasks = [e.task for e in said if isinstance(e, ev.TaskEvent)]
        for task in dict.fromkeys(self.state.owner(t) for t in tasks):
            self.on_change(task)
