"""Repository-wide settings (`forge.toml` at the repository root) and the
verification config shared by plans, `forge verify` and the hooks."""

from __future__ import annotations

import difflib
import hashlib
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import field, replace
from pathlib import Path
from typing import TypeGuard

from forge.agents.names import agent_name_problem
from forge.base.files import JsonObject
from forge.base.settings import DEFAULT_GRACE
from forge.base.tomlread import LineOf, Problems, TableReader, TomlSource, parse_toml
from forge.errors import ForgeError
from forge.frozen import frozen
from forge.plan.budget import parse_prices
from forge.plan.cluster_table import HostTable, parse_cluster, parse_host
from forge.plan.lanes import LaneOptions, TestsWord, lane_network, read_lanes, read_tests
from forge.plan.names import ref_part_problem

DEFAULT_RERUNS = 2
# Every lane has a time limit: a hanging test suite must not hang the gate forever.
DEFAULT_VERIFY_TIMEOUT = 3600.0
DEFAULT_SETUP_TIMEOUT = 10 * 60.0  # seconds `setup` may run in one worktree or checkout


@frozen
class VerifyConfig:
    """How a commit is verified: named lanes run in parallel, each a shell command.

    A single `verify = "cmd"` is one lane named "verify".
    """

    lanes: tuple[tuple[str, str], ...]  # (lane name, shell command), in declared order
    reruns: int = DEFAULT_RERUNS  # reruns of a failing lane with an unchanged tree
    timeout: float = DEFAULT_VERIFY_TIMEOUT  # seconds per lane run
    grace: float = DEFAULT_GRACE  # seconds between TERM and KILL when stopping
    # From forge.toml's [verify] or a plan, for its runs (never stored with the
    # config): each checkout is prepared by setup and every lane runs in env.
    setup: str | None = None
    setup_timeout: float | None = None
    env: tuple[tuple[str, str], ...] = ()
    # `gate_on` of a [verify] table: "regressions" or "green" (None: not said); how
    # the gate judges, not what a verdict means (left out of the fingerprint)
    gate_on: str | None = None
    # What lane tables say beside their commands (lanes written as strings: none).
    options: tuple[tuple[str, LaneOptions], ...] = ()
    # How failing tests with a flaky history are treated ("auto", "off"; None: as
    # forge.toml's [tests] says, else "auto"), and when one leaves quarantine.
    quarantine: str | None = None
    release_after: int | None = None

    def options_of(self, lane: str) -> LaneOptions:
        return dict(self.options).get(lane) or LaneOptions()

    networked: tuple[str, ...] = ()  # lanes that keep the network in the sandbox
    # forge.toml's `verify_pool_max` and `[tests]` as read with the rest of a run's (or
    # a command's) config, so one run verifies under one forge.toml (None: not read
    # with it, forge.toml is read when needed). Never stored; not part of equality.
    pool_max: int | None = field(default=None, compare=False)
    # The lanes run under bubblewrap: a run's choice (never stored), part of what a
    # verdict means (a PASS without the sandbox does not answer for one with it).
    sandboxed: bool = False
    # The host's loopback ports a lane with the network reaches in the sandbox: the
    # plan's `host_ports` (never stored; not part of equality).
    host_ports: tuple[int, ...] = field(default=(), compare=False)
    team: TestsWord | None = field(default=None, compare=False)

    def to_dict(self) -> JsonObject:
        out: dict[str, object] = {
            "lanes": [[name, cmd] for name, cmd in self.lanes],
            "reruns": self.reruns,
            "timeout": self.timeout,
            "grace": self.grace,
        }
        options = {name: o.to_dict() for name, o in self.options if o.to_dict()}
        if options:
            out["options"] = options
        if self.networked:
            out["networked"] = list(self.networked)
        return out

    @classmethod
    def from_dict(cls, data: JsonObject) -> VerifyConfig:
        return cls(
            lanes=tuple((str(n), str(c)) for n, c in data["lanes"]),
            reruns=int(data.get("reruns", DEFAULT_RERUNS)),
            # A config recorded before every lane had a limit gets the default.
            timeout=float(data.get("timeout") or DEFAULT_VERIFY_TIMEOUT),
            grace=float(data.get("grace", DEFAULT_GRACE)),
            options=tuple(
                (str(n), LaneOptions.from_dict(o)) for n, o in dict(data.get("options", {})).items()
            ),
            networked=tuple(data.get("networked", ())),
        )

    def fingerprint(self) -> str:
        """Identifies the config for the verdict cache. The grace period is left out:
        it changes how a run is stopped, not what a verdict means."""
        key: dict[str, object] = {
            "lanes": self.to_dict()["lanes"],
            "reruns": self.reruns,
            "timeout": self.timeout,
        }
        # The environment a lane runs in is part of what its verdict means.
        if self.networked:
            key["networked"] = sorted(self.networked)
        if self.setup:
            key["setup"] = self.setup
        if self.env:
            key["env"] = [list(kv) for kv in self.env]
        # A lane's report and whether it may run no test change what its verdict
        # means; how it runs a subset does not (a subset's verdict is never kept).
        judged = {
            name: {k: v for k, v in o.to_dict().items() if k != "subset"}
            for name, o in self.options
        }
        if any(judged.values()):
            key["options"] = judged
        if self.quarantine == "off":
            key["quarantine"] = "off"
        if self.sandboxed:
            key["sandbox"] = True
        return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]


# --- strict checking of TOML settings (plans and forge.toml share it) --------------

# Keys people write by habit from other tools, mapped to the key forge means.
ALIASES = {
    "depends": "deps",
    "depends_on": "deps",
    "dependencies": "deps",
    "needs": "deps",
    "after": "deps",
    "cmd": "run",
    "shell": "run",
    "paths": "files",
    "file": "files",
    "description": "title",
    "parallel": "max_parallel",
    "reruns": "verify_reruns",
}


def did_you_mean(key: str, allowed: Iterable[str]) -> str:
    """ " (did you mean `deps`?)" when `key` looks like one of `allowed`, else ""."""
    allowed = list(allowed)
    alias = ALIASES.get(key)
    if alias in allowed:
        return f" (did you mean `{alias}`?)"
    close = difflib.get_close_matches(key, allowed, n=1, cutoff=0.6)
    return f" (did you mean `{close[0]}`?)" if close else ""


def check_keys(
    table: Mapping[str, object],
    allowed: Iterable[str],
    *,
    what: str,
    problems: Problems,
    line_of: Callable[[str], int | None],
) -> None:
    """Report every key of `table` not in `allowed`: a typo must never be ignored."""
    allowed = list(allowed)
    for key in table:
        if key not in allowed:
            problems.add(
                f"{what}: unknown key `{key}`{did_you_mean(key, allowed)}", line=line_of(key)
            )


def is_str_list(value: object) -> TypeGuard[list[str]]:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def parse_verify(
    value: object,
    *,
    reruns: object,
    what: str,
    problems: Problems,
    line_of: Callable[[str], int | None],
) -> VerifyConfig | None:
    """A VerifyConfig from `verify = "cmd"` or a `[verify]` table (`command` or
    `lanes`, `reruns`, `timeout`, `grace`, and in forge.toml `setup`, `setup_timeout`,
    `env` as a plan means them); `reruns` is a separate `verify_reruns` key (None
    when absent). Problems are added, not raised."""
    before = len(problems.items)
    if value is None:
        if reruns is not None:
            problems.add(
                "`verify_reruns` is set but the plan has no `verify` command",
                line=line_of("verify_reruns"),
            )
        return None
    timeout: float | None = None
    grace = DEFAULT_GRACE
    table_reruns: object = None
    lanes: list[tuple[str, str]] = []
    options: list[tuple[str, LaneOptions]] = []
    networked: tuple[str, ...] = ()
    prepare, gate_on = _Prepare(), None
    if isinstance(value, str):
        if not value.strip():
            problems.add(f"{what}: the verify command is empty", line=line_of("verify"))
        lanes = [("verify", value)]
    elif isinstance(value, dict):
        check_keys(
            value,
            VERIFY_KEYS,
            what=what,
            problems=problems,
            line_of=line_of,
        )
        prepare = _verify_prepare(value, what, problems, line_of)
        read = read_lanes(
            value, what=what, problems=problems, line_of=line_of, name_problem=ref_part_problem
        )
        lanes = [(name, cmd) for name, cmd, _o in read]
        options = [(name, o) for name, _c, o in read if o != LaneOptions()]
        networked = lane_network(value.get("lanes"), what=what, problems=problems, line_of=line_of)
        table_reruns = value.get("reruns")
        get = TableReader(value, problems, what=what, line_of=line_of, quote=True)
        timeout = get.duration("timeout")
        given_grace = get.duration("grace")
        grace = DEFAULT_GRACE if given_grace is None else given_grace
        if "gate_on" in value:
            gate_on = get.one_of("gate_on", GATE_ON)
    else:
        problems.add(
            f"{what}: `verify` must be a command string or a table", line=line_of("verify")
        )
    count = _verify_reruns(reruns, table_reruns, what=what, problems=problems, line_of=line_of)
    if len(problems.items) > before:
        return None
    return VerifyConfig(
        lanes=tuple(lanes),
        reruns=count,
        timeout=DEFAULT_VERIFY_TIMEOUT if timeout is None else timeout,
        grace=grace,
        options=tuple(options),
        networked=networked,
        setup=prepare.setup,
        setup_timeout=prepare.setup_timeout,
        env=prepare.env,
        gate_on=gate_on,
    )


PREPARE_KEYS = ("setup", "setup_timeout", "env")
# The keys each table accepts (docs/reference/ is generated from them).
VERIFY_KEYS = ("command", "lanes", "reruns", "timeout", "grace", "gate_on", *PREPARE_KEYS)
FORGE_TOML_KEYS = (
    "agents",
    "verify",
    "cluster",
    "prices",
    "auto",
    "draft",
    "notify",
    "tests",
    "verify_pool_max",
    "host",
)
DEFAULT_POOL_MAX = 3  # verification checkouts kept per (setup, env): forge.toml `verify_pool_max`
GATE_ON = ("regressions", "green")  # what the gate lands on: no new failures, or all pass


@frozen
class _Prepare:
    """How a `[verify]` table prepares each checkout (its VerifyConfig fields)."""

    setup: str | None = None
    setup_timeout: float | None = None
    env: tuple[tuple[str, str], ...] = ()


def _verify_prepare(
    table: Mapping[str, object], what: str, problems: Problems, line_of: LineOf
) -> _Prepare:
    """`setup`, `setup_timeout` and `env` of a `[verify]` table."""
    read = TableReader(table, problems, what=what, line_of=line_of)
    setup, limit, env = read.string("setup"), read.duration("setup_timeout"), read.str_map("env")
    if not setup:
        return _Prepare(env=tuple(sorted(env.items())))
    return _Prepare(setup, limit or DEFAULT_SETUP_TIMEOUT, tuple(sorted(env.items())))


def _verify_reruns(
    reruns: object,
    table_reruns: object,
    *,
    what: str,
    problems: Problems,
    line_of: Callable[[str], int | None],
) -> int:
    """Flake reruns, from `verify_reruns` or `verify.reruns` (not both)."""
    if reruns is not None and table_reruns is not None:
        problems.add(
            f"{what}: reruns are set twice (`verify_reruns` and `verify.reruns`); keep one",
            line=line_of("verify_reruns"),
        )
    given = reruns if reruns is not None else table_reruns
    if given is None:
        return DEFAULT_RERUNS
    if isinstance(given, bool) or not isinstance(given, int) or given < 0:
        key = "verify_reruns" if reruns is not None else "reruns"
        problems.add(f"{what}: `{key}` must be a whole number >= 0", line=line_of(key))
        return DEFAULT_RERUNS
    return given


def _json_like(value: object) -> bool:
    if isinstance(value, str | int | float | bool):
        return True
    if isinstance(value, list):
        return all(_json_like(v) for v in value)
    if isinstance(value, dict):
        return all(_json_like(v) for v in value.values())
    return False


def parse_agents(
    value: object,
    *,
    problems: Problems,
    line_of: LineOf,
    src: TomlSource | None = None,
) -> dict[str, Mapping[str, object]]:
    """`[agents.NAME]` tables: their shape, then (with the file's text, `src`) every
    key as the agent will read it, each problem at its line."""
    if not isinstance(value, dict):
        problems.add("`agents` must be a table of [agents.NAME] tables", line=line_of("agents"))
        return {}
    out: dict[str, Mapping[str, object]] = {}
    before = len(problems.items)
    for name, table in value.items():
        line = line_of(f"agents.{name}")
        what = f"agent `{name}`"
        why = agent_name_problem(name)
        if why:
            problems.add(f"{what}: {why}", line=line)
        if not isinstance(table, dict):
            problems.add(f"{what}: must be a table ([agents.{name}])", line=line)
            continue
        for key in ("command", "models", "efforts"):
            if key in table and (not is_str_list(table[key]) or not table[key]):
                problems.add(f"{what}: `{key}` must be a non-empty list of strings", line=line)
        if not _json_like(table):
            problems.add(f"{what}: values must be strings, numbers, booleans or lists", line=line)
        out[name] = json.loads(json.dumps(table))
    if src is not None and len(problems.items) == before:
        _read_agents(out, problems, src)
    return out


def _read_agents(
    tables: Mapping[str, Mapping[str, object]], problems: Problems, src: TomlSource
) -> None:
    """Read each table as the agent will (over its preset, when it is named like
    one), so a mistake is reported with its line now, not when a task first runs."""
    from forge.agents.definition import AgentDef
    from forge.agents.presets import over_preset

    for name, table in tables.items():
        line_of = src.table_keys(f"agents.{name}", fallback=src.table_line("agents"))
        AgentDef.read(
            name, over_preset(name, table), problems, what=f"agent `{name}`", line_of=line_of
        )


# --- forge.toml -------------------------------------------------------------------

REPO_CONFIG_FILE = "forge.toml"


@frozen
class RepoConfig:
    """Repository-wide settings from `forge.toml` at the repository root."""

    agents: Mapping[str, Mapping[str, object]] = field(default_factory=dict)
    verify: VerifyConfig | None = None
    prices: Mapping[str, tuple[float, float]] = field(default_factory=dict)  # `[prices]`
    auto: tuple[str, ...] = ()  # the pool of `agent = "auto"`, when a plan names none
    draft_agent: str | None = None  # [draft] agent: the planner of `forge draft`
    tests: TestsWord = field(default_factory=TestsWord)  # `[tests]`: a team's word on tests

    def all_prices(self) -> dict[str, tuple[float, float]]:
        from forge.agents.prices import DEFAULT_PRICES

        return {**DEFAULT_PRICES, **self.prices}

    cluster_address: str | None = None  # [cluster] address
    cluster_remote: str | None = None  # [cluster] remote: a git URL or path the workers reach
    notify: str | None = None  # the command told of a run's pauses and end (a plan's wins)
    cluster_tls: tuple[str, str, str] | None = None  # [cluster] tls_ca, tls_cert, tls_key
    cluster_insecure: bool = False  # [cluster] insecure: a scheduler reached without TLS
    verify_pool_max: int = DEFAULT_POOL_MAX  # shared verification checkouts kept per key
    host: HostTable = field(default_factory=HostTable)  # [host]: where `forge pr` hands off

    def with_settings(self, config: VerifyConfig | None) -> VerifyConfig | None:
        """`config` carrying this file's pool size and word on tests, so whatever
        verifies with it never reads forge.toml again."""
        if config is None:
            return None
        return replace(config, pool_max=self.verify_pool_max, team=self.tests)


def load_repo_config(repo_root: Path, *, read_agents: bool = True) -> RepoConfig:
    """Read `forge.toml` at `repo_root` (missing: an empty config). Every problem is
    reported at once, as a PlanError naming forge.toml and the line. Without
    `read_agents` (the hooks and `forge verify`, which need only [verify]) the
    [agents] tables are checked for shape only, and the agents code is not loaded."""
    path = repo_root / REPO_CONFIG_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return RepoConfig()
    except (OSError, UnicodeDecodeError) as exc:
        raise ForgeError(f"cannot read {path}: {exc}") from exc
    problems = Problems(str(path))
    data = parse_toml(text, problems)
    src = TomlSource(text)

    def top(key: str) -> int | None:
        return src.key_line(key) or src.table_line(key)

    check_keys(
        data,
        FORGE_TOML_KEYS,
        what="forge.toml",
        problems=problems,
        line_of=top,
    )
    agents = parse_agents(
        data.get("agents", {}),
        problems=problems,
        line_of=lambda k: src.table_line(k) or top("agents"),
        src=src if read_agents else None,
    )
    verify_header = src.table_line("verify")

    def in_verify(key: str) -> int | None:
        found = src.key_line(key, verify_header) if verify_header else None
        return found or src.table_line(f"verify.{key}") or verify_header or top(key)

    verify = parse_verify(
        data.get("verify"), reruns=None, what="[verify]", problems=problems, line_of=in_verify
    )
    cluster = parse_cluster(data.get("cluster", {}), problems, src.table_line("cluster"))
    host = parse_host(data.get("host", {}), problems, src.table_line("host"))
    prices = parse_prices(data.get("prices", {}), problems=problems, line_of=top)
    auto = data.get("auto", [])
    if not isinstance(auto, list) or not all(isinstance(v, str) and v.strip() for v in auto):
        problems.add(
            '`auto` must be a list of agent specs, e.g. ["claude:sonnet"]', line=top("auto")
        )
        auto = []
    draft = data.get("draft", {})
    planner = draft.get("agent") if isinstance(draft, dict) else None
    if not isinstance(draft, dict) or set(draft) - {"agent"} or not isinstance(planner, str | None):
        problems.add(
            '[draft] takes one key: agent = "claude:opus" (the planner)', line=top("draft")
        )
    notify = data.get("notify")
    if notify is not None and (not isinstance(notify, str) or not notify.strip()):
        problems.add("`notify` must be a command (a non-empty string)", line=top("notify"))
        notify = None
    tests = (
        read_tests(data["tests"], what="[tests]", problems=problems, line_of=top)
        if "tests" in data
        else TestsWord()
    )
    pool_max = TableReader(data, problems, what="", line_of=top, quote=True).integer(
        "verify_pool_max", low=1, default=DEFAULT_POOL_MAX
    )
    problems.raise_if_any()
    config = RepoConfig(
        verify_pool_max=pool_max,
        host=host,
        tests=tests,
        agents=agents,
        verify=verify,
        cluster_address=cluster.address,
        cluster_remote=cluster.remote,
        cluster_tls=cluster.tls,
        cluster_insecure=cluster.insecure,
        prices=prices,
        auto=tuple(dict.fromkeys(auto)),
        draft_agent=planner.strip() or None if isinstance(planner, str) else None,
        notify=notify,
    )
    return replace(config, verify=config.with_settings(verify))
