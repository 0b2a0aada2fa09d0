"""The plan: frozen dataclasses for a plan and its tasks, and their defaults.

Reading and checking a plan file is forge/plan/load.py's job (`load_plan`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field, replace
from pathlib import Path
from typing import Literal

from forge.base.durations import parse_duration
from forge.base.files import JsonObject
from forge.errors import ForgeError
from forge.frozen import frozen
from forge.plan.names import ref_part_problem
from forge.plan.repo_config import DEFAULT_SETUP_TIMEOUT, RepoConfig, VerifyConfig

__all__ = [
    "DEFAULT_MAX_PARALLEL",
    "DEFAULT_SETUP_TIMEOUT",
    "DEFAULT_TIMEOUT",
    "Plan",
    "Task",
    "parse_duration",
]

# Two tasks at once is a safe default: real parallelism, yet few enough agents that
# a plan written without thought for quotas does not hit a rate limit at once.
DEFAULT_MAX_PARALLEL = 2
DEFAULT_TIMEOUT = 30 * 60.0  # seconds an attempt (agent or shell command, then check) may run
DEFAULT_ESCALATE_AFTER = 3
DEFAULT_BATCH_MAX = 8  # tasks verified together at most (bench/gate.py measures it)
# Candidates verified at once (speculation); 2 did not pay on 2 cores (bench/gate.py).
DEFAULT_VERIFY_PARALLEL = 1

Scope = Literal["error", "warn"]
Clean = Literal["untracked", "all"]
Gate = Literal["queue", "end", "off"]
Select = Literal["first", "best"]
BatchWindow = Literal["adaptive", "fixed"]


@frozen(kw_only=True)
class Task:
    id: str
    title: str = ""
    prompt: str | None = None  # an agent task: what to ask the agent
    run: str | None = None  # a shell task: the command (exactly one of prompt/run)
    files: tuple[str, ...] = ()  # normalized patterns the task may change
    deps: tuple[str, ...] = ()
    check: str | None = None  # the task's own check, run in its worktree
    agent: str | None = None  # agent spec; None: the plan's
    timeout: float | None = None  # seconds; None: the plan's
    estimate: float | None = None  # relative size for the critical path; None: 1
    review: str | bool | None = None  # reviewer spec; False: none; None: the plan's
    # Best-of-N (forge/plan/candidates.py): these specs at once, or N runs of its own
    # spec; None: the plan's.
    candidates: tuple[str, ...] | None = None
    best_of: int | None = None
    select: Select | None = None
    judge: str | None = None
    network: bool = False  # its check keeps the network in the sandbox

    @property
    def is_shell(self) -> bool:
        return self.run is not None

    def definition(self) -> str:
        """Identifies what the task asks for: work merged under another definition
        is not this task's work any more."""
        import hashlib
        import json

        what = [self.prompt, self.run, list(self.files), list(self.deps), self.check]
        return hashlib.sha256(json.dumps(what).encode()).hexdigest()[:16]

    def to_dict(self) -> JsonObject:
        return {
            "id": self.id,
            "title": self.title,
            "prompt": self.prompt,
            "run": self.run,
            "files": list(self.files),
            "deps": list(self.deps),
            "check": self.check,
            "agent": self.agent,
            "timeout": self.timeout,
            "estimate": self.estimate,
            "review": self.review,
            "candidates": None if self.candidates is None else list(self.candidates),
            "best_of": self.best_of,
            "select": self.select,
            "judge": self.judge,
            "network": self.network,
        }

    @classmethod
    def from_dict(cls, data: JsonObject) -> Task:
        return cls(
            id=data["id"],
            title=data.get("title", ""),
            prompt=data.get("prompt"),
            run=data.get("run"),
            files=tuple(data.get("files", ())),
            deps=tuple(data.get("deps", ())),
            check=data.get("check"),
            agent=data.get("agent"),
            timeout=data.get("timeout"),
            estimate=data.get("estimate"),
            review=data.get("review"),
            candidates=None if data.get("candidates") is None else tuple(data["candidates"]),
            best_of=data.get("best_of"),
            select=data.get("select"),
            judge=data.get("judge"),
            network=bool(data.get("network", False)),
        )


@frozen(kw_only=True)
class Plan:
    name: str
    source: Path | None = None  # the file it was loaded from (absolute)
    base: str | None = None  # None: HEAD when the plan is recorded
    max_parallel: int = DEFAULT_MAX_PARALLEL
    setup: str | None = None
    setup_timeout: float = DEFAULT_SETUP_TIMEOUT
    # Environment of every command run in a worktree (setup, agents, checks, lanes);
    # values may use {worktree} and $VAR.
    env: Mapping[str, str] = field(default_factory=dict)
    verify: VerifyConfig | None = None  # None: forge.toml's [verify], if any
    agent: str | None = None
    fallback: tuple[str, ...] = ()  # agent specs to use while the task's own is paused
    review: str | None = None  # reviewer agent spec for every prompt task
    timeout: float = DEFAULT_TIMEOUT
    log_cap: int | None = None  # bytes of a command's output kept in its log; None: default
    budget: float | None = None  # USD; the run pauses when the plan's spend reaches it
    escalate_after: int = DEFAULT_ESCALATE_AFTER  # 0: never escalate
    escalate_effort: bool = False
    scope: Scope = "error"  # changes outside a task's files: fail the task, or warn
    clean: Clean = "untracked"
    gate: Gate = "queue"  # how work lands when a verification is configured
    batch_max: int = DEFAULT_BATCH_MAX
    # adaptive: halved after a culprit, one more after a pass, at most batch_max
    batch_window: BatchWindow = "adaptive"
    gate_on: str | None = None  # "regressions" or "green"; None: [verify]'s, else regressions
    verify_parallel: int = DEFAULT_VERIFY_PARALLEL
    quarantine: str | None = None  # "auto" or "off" (None: forge.toml's [tests], else auto)
    release_after: int | None = None
    # Every command under bubblewrap (forge/base/sandbox.py); None: not said, on
    # where the sandbox holds (sandbox.choose)
    sandbox: bool | None = None
    sockets: tuple[str, ...] = ()  # sockets (paths or variables) a sandboxed task may reach
    # the host's loopback TCP ports a sandboxed command with the network reaches
    host_ports: tuple[int, ...] = ()
    strict_model: bool = False  # an attempt that ran another model than asked is INFRA
    notify: str | None = None  # told of a run's pause or end (forge/run/notify.py)
    auto: tuple[str, ...] = ()  # the pool `agent = "auto"` chooses from (else forge.toml's)
    candidates: tuple[str, ...] = ()  # best-of-N for every prompt task (or `best_of`)
    best_of: int | None = None
    select: Select = "first"
    judge: str | None = None
    agents: Mapping[str, Mapping[str, object]] = field(default_factory=dict)
    tasks: tuple[Task, ...] = ()

    def agent_tables(
        self, repo_agents: Mapping[str, Mapping[str, object]]
    ) -> dict[str, Mapping[str, object]]:
        """The `[agents.NAME]` tables this plan runs with: forge.toml's (`repo_agents`),
        the plan's own winning name by name."""
        return {**repo_agents, **self.agents}

    def find_task(self, task_id: str) -> Task | None:
        return next((t for t in self.tasks if t.id == task_id), None)

    def task(self, task_id: str) -> Task:
        """The task `task_id`, or a ForgeError naming the tasks there are."""
        found = self.find_task(task_id)
        if found is None:
            from forge.plan.names import did_you_mean

            ids = [t.id for t in self.tasks]
            hint = did_you_mean(task_id, ids)
            raise ForgeError(
                f"unknown task '{task_id}' in plan '{self.name}'{hint} (tasks: {', '.join(ids)})"
            )
        return found

    @property
    def task_ids(self) -> tuple[str, ...]:
        return tuple(t.id for t in self.tasks)

    def verify_config(self, repo_default: VerifyConfig | None) -> VerifyConfig | None:
        """The verification of this plan's runs: its own `verify`, else the
        repository's, run with the plan's `setup` and `env` in each checkout."""
        config = self.verify if self.verify is not None else repo_default
        if config is None:
            return None
        if self.host_ports:
            config = replace(config, host_ports=self.host_ports)
        if self.quarantine or self.release_after:
            config = replace(
                config,
                quarantine=self.quarantine or config.quarantine,
                release_after=self.release_after or config.release_after,
            )
        if self.setup is None and not self.env and self.verify is None:
            return config  # forge.toml's own setup and env, which its command needs
        return replace(
            config,
            setup=self.setup,
            setup_timeout=self.setup_timeout,
            env=tuple(sorted(self.env.items())),
        )

    def verify_under(self, repo: RepoConfig) -> VerifyConfig | None:
        """The verification of this plan's runs (verify_config) under forge.toml as
        `repo` read it, carrying that reading's pool size and word on tests."""
        return repo.with_settings(self.verify_config(repo.verify))

    def review_of(self, task: Task) -> str | None:
        """The reviewer spec for `task`: its own, else the plan's; none for a
        shell task or a task that sets `review = false`."""
        if task.run is not None or task.review is False:
            return None
        return task.review if isinstance(task.review, str) else self.review

    def timeout_of(self, task: Task, agent_timeout: float | None = None) -> float:
        """Seconds one attempt of `task` may run: its own timeout, else its agent's,
        else the plan's."""
        for seconds in (task.timeout, agent_timeout):
            if seconds is not None:
                return seconds
        return self.timeout

    def to_dict(self) -> JsonObject:
        return {
            "name": self.name,
            "source": None if self.source is None else str(self.source),
            "base": self.base,
            "max_parallel": self.max_parallel,
            "setup": self.setup,
            "setup_timeout": self.setup_timeout,
            "env": dict(self.env),
            "verify": None if self.verify is None else self.verify.to_dict(),
            "agent": self.agent,
            "fallback": list(self.fallback),
            "review": self.review,
            "timeout": self.timeout,
            "log_cap": self.log_cap,
            "budget": self.budget,
            "escalate_after": self.escalate_after,
            "escalate_effort": self.escalate_effort,
            "scope": self.scope,
            "clean": self.clean,
            "gate": self.gate,
            "batch_max": self.batch_max,
            "batch_window": self.batch_window,
            "gate_on": self.gate_on,
            "verify_parallel": self.verify_parallel,
            "quarantine": self.quarantine,
            "release_after": self.release_after,
            "sandbox": self.sandbox,
            "sockets": list(self.sockets),
            "host_ports": list(self.host_ports),
            "strict_model": self.strict_model,
            "notify": self.notify,
            "auto": list(self.auto),
            "candidates": list(self.candidates),
            "best_of": self.best_of,
            "select": self.select,
            "judge": self.judge,
            "agents": {k: dict(v) for k, v in self.agents.items()},
            "tasks": [t.to_dict() for t in self.tasks],
        }

    @classmethod
    def from_dict(cls, data: JsonObject) -> Plan:
        return cls(
            name=data["name"],
            source=None if data.get("source") is None else Path(data["source"]),
            base=data.get("base"),
            max_parallel=data.get("max_parallel", DEFAULT_MAX_PARALLEL),
            setup=data.get("setup"),
            setup_timeout=data.get("setup_timeout", DEFAULT_SETUP_TIMEOUT),
            env=dict(data.get("env", {})),
            verify=None if data.get("verify") is None else VerifyConfig.from_dict(data["verify"]),
            agent=data.get("agent"),
            fallback=tuple(data.get("fallback", ())),
            review=data.get("review"),
            timeout=data.get("timeout", DEFAULT_TIMEOUT),
            log_cap=data.get("log_cap"),
            budget=data.get("budget"),
            escalate_after=data.get("escalate_after", DEFAULT_ESCALATE_AFTER),
            escalate_effort=data.get("escalate_effort", False),
            scope=data.get("scope", "error"),
            clean=data.get("clean", "untracked"),
            gate=data.get("gate", "queue"),
            batch_max=data.get("batch_max", DEFAULT_BATCH_MAX),
            batch_window=data.get("batch_window", "adaptive"),
            gate_on=data.get("gate_on"),
            verify_parallel=data.get("verify_parallel", DEFAULT_VERIFY_PARALLEL),
            quarantine=data.get("quarantine"),
            release_after=data.get("release_after"),
            sandbox=None if data.get("sandbox") is None else bool(data["sandbox"]),
            sockets=tuple(data.get("sockets", ())),
            host_ports=tuple(data.get("host_ports", ())),
            strict_model=bool(data.get("strict_model", False)),
            notify=data.get("notify"),
            auto=tuple(data.get("auto", ())),
            candidates=tuple(data.get("candidates", ())),
            best_of=data.get("best_of"),
            select=data.get("select", "first"),
            judge=data.get("judge"),
            agents={k: dict(v) for k, v in data.get("agents", {}).items()},
            tasks=tuple(Task.from_dict(t) for t in data.get("tasks", ())),
        )


def name_problem(name: str) -> str | None:
    """Why `name` cannot name a plan (None if it can)."""
    why = ref_part_problem(name)
    if why:
        return why
    if name.endswith("-integration"):
        # forge/<name>-integration is the integration branch of plan <name>; a plan
        # named so would collide with it (refs are files).
        return "a plan name cannot end in `-integration`"
    return None
