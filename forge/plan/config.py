"""Repository-wide settings (`forge.toml` at the repository root) and the
verification config shared by plans, `forge verify` and the hooks."""

from __future__ import annotations

import difflib
import hashlib
import json
import math
import re
import tomllib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from forge.errors import ForgeError, PlanError

DEFAULT_GRACE = 5.0
DEFAULT_RERUNS = 2


@dataclass(frozen=True)
class VerifyConfig:
    """How a commit is verified: named lanes run in parallel, each a shell command.

    A single `verify = "cmd"` is one lane named "verify".
    """

    lanes: tuple[tuple[str, str], ...]  # (lane name, shell command), in declared order
    reruns: int = DEFAULT_RERUNS  # reruns of a failing lane with an unchanged tree
    timeout: float | None = None  # seconds per lane run; None: no limit
    grace: float = DEFAULT_GRACE  # seconds between TERM and KILL when stopping

    def to_dict(self) -> dict[str, Any]:
        return {
            "lanes": [[name, cmd] for name, cmd in self.lanes],
            "reruns": self.reruns,
            "timeout": self.timeout,
            "grace": self.grace,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> VerifyConfig:
        return cls(
            lanes=tuple((str(n), str(c)) for n, c in data["lanes"]),
            reruns=int(data.get("reruns", DEFAULT_RERUNS)),
            timeout=None if data.get("timeout") is None else float(data["timeout"]),
            grace=float(data.get("grace", DEFAULT_GRACE)),
        )

    def fingerprint(self) -> str:
        """Identifies the config for the verdict cache. The grace period is left out:
        it changes how a run is stopped, not what a verdict means."""
        key = {"lanes": self.to_dict()["lanes"], "reruns": self.reruns, "timeout": self.timeout}
        return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]


# --- durations --------------------------------------------------------------------

_DURATION = re.compile(
    r"^(?:(?P<h>\d+(?:\.\d+)?)h)?(?:(?P<m>\d+(?:\.\d+)?)m)?(?:(?P<s>\d+(?:\.\d+)?)s)?$"
)


def parse_duration(value: str | int | float) -> float:
    """Seconds from "90s", "30m", "1h", "1h30m" or a plain number of seconds.

    Raises ValueError (with a message fit for a problem line) for anything else,
    including zero and negative values: a timeout of nothing is a typo, not a wish.
    """
    if isinstance(value, bool):
        raise ValueError(f"expected a duration such as 90s, 30m or 1h30m, got {value!r}")
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str):
        text = value.strip().lower().replace(" ", "")
        try:
            seconds = float(text)
        except ValueError:
            m = _DURATION.match(text)
            if not text or not m:
                raise ValueError(
                    f"expected a duration such as 90s, 30m or 1h30m, got {value!r}"
                ) from None
            seconds = float(m["h"] or 0) * 3600 + float(m["m"] or 0) * 60 + float(m["s"] or 0)
    else:
        raise ValueError(f"expected a duration such as 90s, 30m or 1h30m, got {value!r}")
    if not math.isfinite(seconds) or seconds <= 0:
        raise ValueError(f"a duration must be more than zero, got {value!r}")
    return seconds


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


class TomlSource:
    """A TOML file's text, to point a problem at a line: tomllib reports lines only
    for syntax errors, so key and table lines are found again in the text."""

    _HEADER = re.compile(r"^\s*\[")

    def __init__(self, text: str) -> None:
        self.lines = text.splitlines()

    def _find(self, pattern: re.Pattern[str], start: int = 0, end: int | None = None) -> int | None:
        for i in range(start, len(self.lines) if end is None else end):
            if pattern.match(self.lines[i]):
                return i + 1
        return None

    def table_line(self, name: str, nth: int = 0) -> int | None:
        """The line of the `nth` `[name]` or `[[name]]` header (1-based), or None."""
        pattern = re.compile(r"^\s*\[\[?\s*" + re.escape(name) + r"\s*\]\]?\s*(#.*)?$")
        seen = 0
        for i, line in enumerate(self.lines):
            if pattern.match(line):
                if seen == nth:
                    return i + 1
                seen += 1
        return None

    def section_end(self, header_line: int) -> int:
        """The index (exclusive, 0-based) where the section starting at `header_line` ends."""
        nxt = self._find(self._HEADER, header_line)
        return len(self.lines) if nxt is None else nxt - 1

    def key_line(self, key: str, header_line: int | None = None) -> int | None:
        """The line of `key = ...` in the section under `header_line` (None: the
        top level, before any table header)."""
        pattern = re.compile(r"^\s*[\"']?" + re.escape(key) + r"[\"']?\s*[=.]")
        if header_line is None:
            first = self._find(self._HEADER)
            return self._find(pattern, 0, None if first is None else first - 1)
        return self._find(pattern, header_line, self.section_end(header_line))


@dataclass
class Problems:
    """Every problem found in one file, each a line `FILE[:LINE]: message`."""

    path: str
    items: list[str] = field(default_factory=list)

    def add(self, message: str, *, line: int | None = None) -> None:
        where = self.path if line is None else f"{self.path}:{line}"
        self.items.append(f"{where}: {message}")

    def raise_if_any(self) -> None:
        if self.items:
            raise PlanError(self.items)


def check_keys(
    table: Mapping[str, Any],
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


NAME_PART = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def ref_part_problem(value: str) -> str | None:
    """Why `value` cannot be one component of a git ref name (None if it can)."""
    if not NAME_PART.match(value):
        return "use letters, digits, `.`, `_` and `-`, starting with a letter or digit"
    if ".." in value:
        return "`..` is not allowed in a git ref name"
    if value.endswith((".lock", ".")):
        return "a git ref name cannot end in `.lock` or `.`"
    return None


def is_str_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def parse_verify(
    value: Any,
    *,
    reruns: Any,
    what: str,
    problems: Problems,
    line_of: Callable[[str], int | None],
) -> VerifyConfig | None:
    """A VerifyConfig from `verify = "cmd"` or a `[verify]` table (`command` or
    `lanes`, `reruns`, `timeout`, `grace`); `reruns` is a separate `verify_reruns`
    key (None when absent). Problems are added, not raised."""
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
    table_reruns: Any = None
    lanes: list[tuple[str, str]] = []
    if isinstance(value, str):
        if not value.strip():
            problems.add(f"{what}: the verify command is empty", line=line_of("verify"))
        lanes = [("verify", value)]
    elif isinstance(value, dict):
        check_keys(
            value,
            ["command", "lanes", "reruns", "timeout", "grace"],
            what=what,
            problems=problems,
            line_of=line_of,
        )
        command, lane_table = value.get("command"), value.get("lanes")
        if (command is None) == (lane_table is None):
            problems.add(
                f"{what}: set exactly one of `command` and `lanes`", line=line_of("verify")
            )
        elif command is not None:
            if not isinstance(command, str) or not command.strip():
                problems.add(
                    f"{what}: `command` must be a non-empty string", line=line_of("command")
                )
            else:
                lanes = [("verify", command)]
        elif not isinstance(lane_table, dict) or not lane_table:
            problems.add(
                f'{what}: `lanes` must be a table of lane = "command"', line=line_of("lanes")
            )
        else:
            for lane, cmd in lane_table.items():
                why = ref_part_problem(lane)
                if why:
                    problems.add(
                        f"{what}: lane name `{lane}` is not valid: {why}", line=line_of(lane)
                    )
                if not isinstance(cmd, str) or not cmd.strip():
                    problems.add(
                        f"{what}: lane `{lane}` must be a non-empty command string",
                        line=line_of(lane),
                    )
                else:
                    lanes.append((lane, cmd))
        table_reruns = value.get("reruns")
        if "timeout" in value:
            try:
                timeout = parse_duration(value["timeout"])
            except ValueError as exc:
                problems.add(f"{what}: `timeout`: {exc}", line=line_of("timeout"))
        if "grace" in value:
            try:
                grace = parse_duration(value["grace"])
            except ValueError as exc:
                problems.add(f"{what}: `grace`: {exc}", line=line_of("grace"))
    else:
        problems.add(
            f"{what}: `verify` must be a command string or a table", line=line_of("verify")
        )
    if reruns is not None and table_reruns is not None:
        problems.add(
            f"{what}: reruns are set twice (`verify_reruns` and `verify.reruns`); keep one",
            line=line_of("verify_reruns"),
        )
    count = DEFAULT_RERUNS
    given = reruns if reruns is not None else table_reruns
    if given is not None:
        if isinstance(given, bool) or not isinstance(given, int) or given < 0:
            key = "verify_reruns" if reruns is not None else "reruns"
            problems.add(f"{what}: `{key}` must be a whole number >= 0", line=line_of(key))
        else:
            count = given
    if len(problems.items) > before:
        return None
    return VerifyConfig(lanes=tuple(lanes), reruns=count, timeout=timeout, grace=grace)


def _json_like(value: Any) -> bool:
    if isinstance(value, str | int | float | bool):
        return True
    if isinstance(value, list):
        return all(_json_like(v) for v in value)
    if isinstance(value, dict):
        return all(_json_like(v) for v in value.values())
    return False


def parse_agents(
    value: Any, *, problems: Problems, line_of: Callable[[str], int | None]
) -> dict[str, dict[str, Any]]:
    """`[agents.NAME]` tables, checked for shape only (the agents module gives them
    meaning): `command`, `models` and `efforts` are lists of strings."""
    if not isinstance(value, dict):
        problems.add("`agents` must be a table of [agents.NAME] tables", line=line_of("agents"))
        return {}
    out: dict[str, dict[str, Any]] = {}
    for name, table in value.items():
        line = line_of(f"agents.{name}")
        what = f"agent `{name}`"
        if not re.match(r"^[A-Za-z0-9][A-Za-z0-9_-]*$", name):
            problems.add(f"{what}: a name uses letters, digits, `_` and `-` (no `:`)", line=line)
        if not isinstance(table, dict):
            problems.add(f"{what}: must be a table ([agents.{name}])", line=line)
            continue
        for key in ("command", "models", "efforts"):
            if key in table and (not is_str_list(table[key]) or not table[key]):
                problems.add(f"{what}: `{key}` must be a non-empty list of strings", line=line)
        if not _json_like(table):
            problems.add(f"{what}: values must be strings, numbers, booleans or lists", line=line)
        out[name] = json.loads(json.dumps(table))
    return out


# --- forge.toml -------------------------------------------------------------------

REPO_CONFIG_FILE = "forge.toml"


@dataclass(frozen=True)
class RepoConfig:
    """Repository-wide settings from `forge.toml` at the repository root."""

    agents: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    verify: VerifyConfig | None = None
    cluster_address: str | None = None  # [cluster] address
    cluster_remote: str | None = None  # [cluster] remote: a git URL or path the workers reach


def load_repo_config(repo_root: Path) -> RepoConfig:
    """Read `forge.toml` at `repo_root` (missing: an empty config). Every problem is
    reported at once, as a PlanError naming forge.toml and the line."""
    path = repo_root / REPO_CONFIG_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return RepoConfig()
    except (OSError, UnicodeDecodeError) as exc:
        raise ForgeError(f"cannot read {path}: {exc}") from exc
    problems = Problems(str(path))
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        problems.add(f"TOML syntax error: {exc}", line=toml_error_line(exc))
        problems.raise_if_any()
        raise AssertionError("unreachable") from exc
    src = TomlSource(text)

    def top(key: str) -> int | None:
        return src.key_line(key) or src.table_line(key)

    check_keys(
        data, ["agents", "verify", "cluster"], what="forge.toml", problems=problems, line_of=top
    )
    agents = parse_agents(
        data.get("agents", {}),
        problems=problems,
        line_of=lambda k: src.table_line(k) or top("agents"),
    )
    verify_header = src.table_line("verify")

    def in_verify(key: str) -> int | None:
        found = src.key_line(key, verify_header) if verify_header else None
        return found or src.table_line(f"verify.{key}") or verify_header or top(key)

    verify = parse_verify(
        data.get("verify"), reruns=None, what="[verify]", problems=problems, line_of=in_verify
    )
    address, remote = _parse_cluster(data.get("cluster", {}), problems, src.table_line("cluster"))
    problems.raise_if_any()
    return RepoConfig(agents=agents, verify=verify, cluster_address=address, cluster_remote=remote)


def _parse_cluster(
    table: Any, problems: Problems, line: int | None
) -> tuple[str | None, str | None]:
    """`[cluster] address = "tcp://host:8786"`, `remote = "ssh://..."` (or a path)."""
    if not isinstance(table, dict):
        problems.add("[cluster] must be a table", line=line)
        return None, None
    check_keys(
        table, ["address", "remote"], what="[cluster]", problems=problems, line_of=lambda _k: line
    )
    values: list[str | None] = []
    for key in ("address", "remote"):
        value = table.get(key)
        if value is not None and (not isinstance(value, str) or not value.strip()):
            problems.add(f"[cluster] {key} must be a non-empty string", line=line)
            value = None
        values.append(value)
    return values[0], values[1]


def toml_error_line(exc: tomllib.TOMLDecodeError) -> int | None:
    """tomllib puts "(at line N, column M)" in its message; pull the line out."""
    m = re.search(r"at line (\d+)", str(exc))
    return int(m.group(1)) if m else None
