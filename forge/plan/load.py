"""Reading a plan file: TOML in, a checked `Plan` out, or every problem at once.

Each problem is one line naming the file, the line where it can be found and the
task. Nothing here writes anything.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import cast

from forge.base.tomlread import LineOf, Problems, TableReader, TomlSource, parse_toml
from forge.errors import ForgeError
from forge.plan.candidates import read_best_of
from forge.plan.lanes import read_mode
from forge.plan.model import (
    DEFAULT_BATCH_MAX,
    DEFAULT_ESCALATE_AFTER,
    DEFAULT_MAX_PARALLEL,
    DEFAULT_SETUP_TIMEOUT,
    DEFAULT_TIMEOUT,
    DEFAULT_VERIFY_PARALLEL,
    BatchWindow,
    Clean,
    Gate,
    Plan,
    Scope,
    Select,
    Task,
    name_problem,
)
from forge.plan.names import ref_part_problem
from forge.plan.patterns import normalize_pattern
from forge.plan.repo_config import (
    GATE_ON,
    VerifyConfig,
    check_keys,
    is_str_list,
    parse_agents,
    parse_verify,
)

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

_PLAN_WORDS = (
    "name base max_parallel setup setup_timeout env verify verify_reruns gate "
    "batch_max batch_window gate_on verify_parallel quarantine release_after agent "
    "fallback review timeout log_cap budget escalate_after escalate_effort scope "
    "clean sandbox sockets host_ports strict_model notify auto candidates best_of select judge "
    "agents task"
)
PLAN_KEYS: tuple[str, ...] = tuple(_PLAN_WORDS.split())
_TASK_WORDS = (
    "id title prompt run files deps check agent timeout estimate review candidates "
    "best_of select judge network"
)
TASK_KEYS: tuple[str, ...] = tuple(_TASK_WORDS.split())


def load_plan(path: Path) -> Plan:
    """Load and check a plan file; PlanError lists every problem found."""
    return load_plan_source(path)[0]


def load_plan_source(path: Path) -> tuple[Plan, bytes]:
    """The plan and the exact bytes it was parsed from (to hash what was checked)."""
    shown = str(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise ForgeError(f"plan file {shown} not found") from None
    except IsADirectoryError:
        raise ForgeError(f"plan file {shown} is a folder, not a TOML file") from None
    except OSError as exc:
        raise ForgeError(f"cannot read plan file {shown}: {exc.strerror}") from None
    return parse_plan(raw, source=path.resolve(), shown=shown), raw


def parse_plan(raw: bytes, *, source: Path, shown: str) -> Plan:
    problems = Problems(shown)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        problems.add(f"not UTF-8 text ({exc.reason} at byte {exc.start})")
        problems.raise_if_any()
        raise AssertionError("unreachable") from exc
    data = parse_toml(text, problems)
    plan = _Checker(data, TomlSource(text), problems, source).plan()
    problems.raise_if_any()
    assert plan is not None
    return plan


class _Checker:
    """Walks the parsed TOML once, collecting every problem instead of stopping."""

    def __init__(
        self, data: Mapping[str, object], src: TomlSource, problems: Problems, source: Path
    ):
        self.data = data
        self.src = src
        self.problems = problems
        self.source = source
        self.dep_map: dict[str, tuple[str, ...]] = {}  # task id -> deps, in plan order
        # The plan's top-level keys, read by type.
        self.get = TableReader(data, problems, what="", line_of=self.top_line, quote=True)

    def top_line(self, key: str) -> int | None:
        return self.src.key_line(key) or self.src.table_line(key)

    def add(self, message: str, key: str | None = None, *, line: int | None = None) -> None:
        if line is None and key is not None:
            line = self.top_line(key)
        self.problems.add(message, line=line)

    # -- top level ---------------------------------------------------------------

    def plan(self) -> Plan | None:
        d = self.data
        check_keys(d, PLAN_KEYS, what="plan", problems=self.problems, line_of=self.top_line)
        get = self.get
        name = self.name()
        base = get.string("base")
        setup = get.string("setup")
        agent = get.string("agent")
        fallback = self.fallback()
        review = get.string("review")
        max_parallel = get.integer("max_parallel", low=1, default=DEFAULT_MAX_PARALLEL)
        escalate_after = get.integer("escalate_after", low=0, default=DEFAULT_ESCALATE_AFTER)
        escalate_effort = get.flag("escalate_effort")
        timeout = get.duration("timeout") or DEFAULT_TIMEOUT
        setup_timeout = get.duration("setup_timeout") or DEFAULT_SETUP_TIMEOUT
        log_cap = get.size("log_cap")
        env = self.env()
        budget = self.budget()
        scope = get.one_of("scope", ("error", "warn"))
        clean = get.one_of("clean", ("untracked", "all"))
        gate = get.one_of("gate", ("queue", "end", "off"))
        batch_max = get.integer("batch_max", low=1, default=DEFAULT_BATCH_MAX)
        batch_window = get.one_of("batch_window", ("adaptive", "fixed"))
        gate_on = get.one_of("gate_on", GATE_ON) if "gate_on" in d else None
        verify_parallel = get.integer("verify_parallel", low=1, default=DEFAULT_VERIFY_PARALLEL)
        sandbox, sockets, host_ports = self.sandbox()
        strict_model = get.flag("strict_model")
        notify = get.string("notify")
        auto = self.spec_list("auto")
        verify = self.verify()
        quarantine = read_mode(d.get("quarantine"), get) if "quarantine" in d else None
        if isinstance(d.get("quarantine"), list):
            get.bad("quarantine", '"auto" or "off" (a list of tests goes in forge.toml\'s [tests])')
        release_after = (
            get.integer("release_after", low=1, default=1) if "release_after" in d else None
        )
        best = read_best_of(d, "plan", self.problems, self.top_line)
        agents = parse_agents(
            d.get("agents", {}),
            problems=self.problems,
            line_of=lambda k: self.src.table_line(k) or self.top_line("agents"),
            src=self.src,
        )
        tasks = self.tasks()
        if self.problems.items:
            return None
        return Plan(
            name=name,
            source=self.source,
            base=base,
            max_parallel=max_parallel,
            setup=setup,
            setup_timeout=setup_timeout,
            env=env,
            verify=verify,
            agent=agent,
            fallback=fallback,
            review=review,
            timeout=timeout,
            log_cap=log_cap,
            budget=budget,
            escalate_after=escalate_after,
            escalate_effort=escalate_effort,
            scope=cast(Scope, scope),
            clean=cast(Clean, clean),
            gate=cast(Gate, gate),
            batch_max=batch_max,
            batch_window=cast(BatchWindow, batch_window),
            gate_on=gate_on,
            verify_parallel=verify_parallel,
            quarantine=quarantine,
            release_after=release_after,
            sandbox=sandbox,
            sockets=sockets,
            host_ports=host_ports,
            strict_model=strict_model,
            notify=notify,
            auto=auto,
            candidates=best.candidates or (),
            best_of=best.best_of,
            select=cast(Select, best.select or "first"),
            judge=best.judge,
            agents=agents,
            tasks=tasks,
        )

    def sandbox(self) -> tuple[bool | None, tuple[str, ...], tuple[int, ...]]:
        """`sandbox = true|false` with `sockets` and `host_ports` beside it, or one
        `[sandbox]` table holding `enabled`, `sockets` and `host_ports`."""
        table = self.data.get("sandbox")
        get = self.get
        if isinstance(table, Mapping):
            get = TableReader(table, self.problems, what="[sandbox]", line_of=self.top_line)
            get.unknown_keys(("enabled", "sockets", "host_ports"))
            for key in ("sockets", "host_ports"):
                if key in self.data:
                    self.add(f"`{key}` is given twice: keep the one in [sandbox]", key)
        sandbox = None
        if isinstance(table, Mapping):
            sandbox = get.flag("enabled") if "enabled" in table else None
        elif table is not None:
            sandbox = get.flag("sandbox")
        sockets = tuple(get.str_list("sockets", unique=True))
        for entry in sockets:
            if not (_ENV_NAME.match(entry) or entry.startswith("/")):
                self.add(
                    f"`sockets`: {entry!r} is neither a variable name nor an absolute path",
                    "sockets",
                )
        return sandbox, sockets, get.ports("host_ports")

    def budget(self) -> float | None:
        if "budget" not in self.data:
            return None
        from forge.plan.budget import parse_budget

        try:
            return parse_budget(self.data["budget"])
        except ValueError as exc:
            self.add(f"`budget`: {exc}", "budget")
            return None

    def name(self) -> str:
        if "name" in self.data:
            name = self.data["name"]
            if not isinstance(name, str):
                self.add("`name` must be a string", "name")
                return ""
            why = name_problem(name)
            if why:
                self.add(f"plan name `{name}` is not valid: {why}", "name")
            return name
        name = self.source.stem
        why = name_problem(name)
        if why:
            self.add(
                f"plan name `{name}` (from the file name) is not valid: {why}; "
                f'set `name = "..."` in the plan'
            )
        return name

    def fallback(self) -> tuple[str, ...]:
        return self.spec_list("fallback")

    def spec_list(self, key: str) -> tuple[str, ...]:
        value = self.data.get(key, [])
        if not is_str_list(value) or not all(v.strip() for v in value):
            self.add(f'`{key}` must be a list of agent specs, e.g. ["codex", "gemini"]', key)
            return ()
        return tuple(dict.fromkeys(value))

    def env(self) -> dict[str, str]:
        raw = self.data.get("env", {})
        if not isinstance(raw, dict):
            self.add('`env` must be a table of strings, e.g. env = { PATH = "..." }', "env")
            return {}
        out: dict[str, str] = {}
        for name, value in raw.items():
            if not _ENV_NAME.match(name):
                self.add(f"`env`: {name!r} is not a valid environment variable name", "env")
            elif not isinstance(value, str):
                self.add(f"`env.{name}` must be a string, got {value!r}", "env")
            else:
                out[name] = value
        return out

    def verify(self) -> VerifyConfig | None:
        header = self.src.table_line("verify")

        def line_of(key: str) -> int | None:
            if key in ("verify", "verify_reruns"):
                return self.top_line(key)
            found = self.src.key_line(key, header) if header else None
            return found or self.src.table_line(f"verify.{key}") or header
            # a lane named like a top-level key still points into [verify]

        return parse_verify(
            self.data.get("verify"),
            reruns=self.data.get("verify_reruns"),
            what="verify",
            problems=self.problems,
            line_of=line_of,
        )

    # -- tasks -------------------------------------------------------------------

    def tasks(self) -> tuple[Task, ...]:
        raw = self.data.get("task")
        if raw is None:
            self.add("no tasks: add at least one [[task]] with id, files and prompt or run")
            return ()
        if not isinstance(raw, list) or not all(isinstance(t, dict) for t in raw):
            self.add("`task` must be written as [[task]] tables", "task")
            return ()
        tasks: list[Task] = []
        headers: dict[str, int | None] = {}  # id -> header line of its first [[task]]
        for n, table in enumerate(raw):
            header = self.src.table_line("task", n)
            tid = table.get("id")
            if isinstance(tid, str) and tid in headers:
                at = headers[tid]
                self.problems.add(
                    f"task `{tid}`: duplicate id (first used" + (f" at line {at})" if at else ")"),
                    line=header,
                )
                continue
            if isinstance(tid, str):
                headers[tid] = header
            task = self.task(n, table)
            if task is not None:
                tasks.append(task)
        # Ids of tasks with other problems still count as known: a dependency on them
        # is not a second problem.
        self.check_deps(known=set(headers), headers=headers)
        return tuple(tasks)

    def task(self, n: int, table: Mapping[str, object]) -> Task | None:
        header = self.src.table_line("task", n)

        def line_of(key: str) -> int | None:
            return (self.src.key_line(key, header) if header else None) or header

        label, tid = self.task_id(n, table, header, line_of)
        get = TableReader(table, self.problems, what=label, line_of=line_of, quote=True)
        before = len(self.problems.items)
        check_keys(table, TASK_KEYS, what=label, problems=self.problems, line_of=line_of)
        title = table.get("title", tid or "")
        if not isinstance(title, str):
            self.problems.add(f"{label}: `title` must be a string", line=line_of("title"))
        prompt, run = self.work(get, header)
        files = self.files(table, label, line_of)
        deps = self.deps(table, label, line_of)
        if tid is not None:
            # Dependencies are checked for every task with an id, even one with other
            # problems, so a cycle through it is reported in the same pass.
            self.dep_map[tid] = deps
        estimate = self.estimate(table, label, line_of)
        timeout = get.duration("timeout")
        check = get.string("check")
        network = get.flag("network")
        agent = get.string("agent")
        review = False if table.get("review") is False else get.string("review")
        best = read_best_of(table, label, self.problems, line_of)
        if tid is None or len(self.problems.items) > before:
            return None
        return Task(
            id=tid,
            title=str(title) or tid,
            prompt=prompt,
            run=run,
            files=files,
            deps=deps,
            check=check,
            agent=agent,
            timeout=timeout,
            estimate=estimate,
            review=review,
            candidates=best.candidates,
            best_of=best.best_of,
            select=cast(Select | None, best.select),
            judge=best.judge,
            network=network,
        )

    def task_id(
        self, n: int, table: Mapping[str, object], header: int | None, line_of: LineOf
    ) -> tuple[str, str | None]:
        """The label problems name the task by, and its id (None when not usable)."""
        raw_id = table.get("id")
        if not isinstance(raw_id, str) or not raw_id:
            label = f"task #{n + 1}"
            if raw_id is None:
                self.problems.add(f"{label}: missing `id`", line=header)
            else:
                self.problems.add(f"{label}: `id` must be a non-empty string", line=line_of("id"))
            return label, None
        label = f"task `{raw_id}`"
        why = ref_part_problem(raw_id)
        if why:
            self.problems.add(f"{label}: id is not valid: {why}", line=line_of("id"))
            return label, None
        return label, raw_id

    def work(self, get: TableReader, header: int | None) -> tuple[str | None, str | None]:
        """(prompt, run): a task is an agent's or a shell command's, not both."""
        prompt, run = get.string("prompt"), get.string("run")
        if "prompt" not in get.table and "run" not in get.table:
            self.problems.add(
                f"{get.what}: needs `prompt` (an agent task) or `run` (a shell command)",
                line=header,
            )
        elif "prompt" in get.table and "run" in get.table:
            get.problem("has both `prompt` and `run`; a task is one or the other", "run")
        return prompt, run

    def deps(self, table: Mapping[str, object], label: str, line_of: LineOf) -> tuple[str, ...]:
        raw_deps = table.get("deps", [])
        if not is_str_list(raw_deps):
            self.problems.add(f"{label}: `deps` must be a list of task ids", line=line_of("deps"))
            return ()
        return tuple(dict.fromkeys(raw_deps))  # a dep listed twice is one dep

    def estimate(self, table: Mapping[str, object], label: str, line_of: LineOf) -> float | None:
        if "estimate" not in table:
            return None
        value = table["estimate"]
        if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
            self.problems.add(
                f"{label}: `estimate` must be a number above 0 (a relative size)",
                line=line_of("estimate"),
            )
            return None
        return float(value)

    def files(self, table: Mapping[str, object], label: str, line_of: LineOf) -> tuple[str, ...]:
        raw = table.get("files")
        line = line_of("files")
        if raw is None:
            self.problems.add(
                f"{label}: missing `files` (what the task may change; `.` for everything)",
                line=line,
            )
            return ()
        if not is_str_list(raw):
            self.problems.add(f"{label}: `files` must be a list of paths or globs", line=line)
            return ()
        if not raw:
            self.problems.add(
                f"{label}: `files` is empty; list what the task may change", line=line
            )
            return ()
        out: list[str] = []
        for entry in raw:
            if entry.startswith(("/", "~")) or (len(entry) > 1 and entry[1] == ":"):
                self.problems.add(
                    f"{label}: `files` entry {entry!r} is absolute; use a path inside the repository",
                    line=line,
                )
            elif ".." in entry.split("/"):
                self.problems.add(
                    f"{label}: `files` entry {entry!r} contains `..`; use a path inside the repository",
                    line=line,
                )
            elif not entry.strip():
                self.problems.add(f"{label}: `files` has an empty entry", line=line)
            else:
                out.append(normalize_pattern(entry))
        return tuple(dict.fromkeys(out))

    def check_deps(self, *, known: set[str], headers: Mapping[str, int | None]) -> None:
        from forge.plan.dag import find_cycle_in

        for tid, deps in self.dep_map.items():
            header = headers.get(tid)
            line = (self.src.key_line("deps", header) if header else None) or header
            for dep in deps:
                if dep not in known:
                    listing = ", ".join(sorted(known))
                    self.problems.add(
                        f"task `{tid}`: unknown dependency `{dep}` (tasks: {listing})", line=line
                    )
        order = {tid: n for n, tid in enumerate(self.dep_map)}
        cycle = find_cycle_in(self.dep_map, order)
        if cycle:
            self.problems.add(f"dependency cycle: {' -> '.join(cycle)}", line=headers.get(cycle[0]))
