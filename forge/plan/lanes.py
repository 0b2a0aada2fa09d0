"""A verification lane written as a table, and the repository's word on tests.

    [verify.lanes]
    lint = "ruff check ."                  # a plain string: the lane's command

    [verify.lanes.unit]
    command = "pytest -q"
    junit = "build/report.xml"             # the lane's own JUnit report (in its checkout)
    subset = "pytest -q {tests}"           # how to run only some of its tests
    allow_empty = true                     # a test runner that ran no test may PASS

    [tests]                                # forge.toml
    quarantine = ["tests/test_clock.py::test_skew"]   # a team's word on flaky tests
    release_after = 20

Pure reading: problems are added, not raised.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from forge.base.files import JsonObject
from forge.base.tomlread import Problems, TableReader
from forge.frozen import frozen

LANE_KEYS = ("command", "junit", "subset", "allow_empty", "network")
TESTS_KEYS = ("quarantine", "release_after")  # forge.toml's [tests]
QUARANTINE_MODES = ("auto", "off")
DEFAULT_RELEASE_AFTER = 20


@frozen
class LaneOptions:
    """What a lane table says beside its command (all optional)."""

    junit: str | None = None  # the JUnit XML report the command writes, relative to its checkout
    subset: str | None = None  # a command running only `{tests}` (space-separated, quoted)
    allow_empty: bool = False  # a recognised test runner that ran no test may PASS

    def to_dict(self) -> JsonObject:
        out: dict[str, object] = {}
        if self.junit:
            out["junit"] = self.junit
        if self.subset:
            out["subset"] = self.subset
        if self.allow_empty:
            out["allow_empty"] = True
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> LaneOptions:
        junit, subset = data.get("junit"), data.get("subset")
        return cls(
            junit=str(junit) if junit else None,
            subset=str(subset) if subset else None,
            allow_empty=bool(data.get("allow_empty", False)),
        )


def read_lane(
    lane: str,
    value: object,
    *,
    what: str,
    problems: Problems,
    line_of: Callable[[str], int | None],
) -> tuple[str, LaneOptions] | None:
    """A lane's command and options, from `lane = "cmd"` or a `[verify.lanes.NAME]`
    table; None (a problem added) when it is neither."""
    if isinstance(value, str):
        if value.strip():
            return value, LaneOptions()
    elif isinstance(value, dict):
        label = f"{what}: lane `{lane}`"
        for key in sorted(set(value) - set(LANE_KEYS)):
            problems.add(
                f"{label}: unknown key `{key}` (known: {', '.join(LANE_KEYS)})", line=line_of(lane)
            )
        get = TableReader(value, problems, what=label, line_of=lambda _k: line_of(lane), quote=True)
        command = get.string("command")
        junit, subset, allow_empty = (
            get.string("junit"),
            get.string("subset"),
            get.flag("allow_empty"),
        )
        if subset is not None and "{tests}" not in subset:
            get.bad(
                "subset", 'a command with `{tests}` where the test ids go, e.g. "pytest -q {tests}"'
            )
        if command is None:
            get.bad("command", "a non-empty command string")
            return None
        return command, LaneOptions(junit=junit, subset=subset, allow_empty=allow_empty)
    problems.add(
        f"{what}: lane `{lane}` must be a non-empty command string or a table with `command`",
        line=line_of(lane),
    )
    return None


def read_lanes(
    table: Mapping[str, object],
    *,
    what: str,
    problems: Problems,
    line_of: Callable[[str], int | None],
    name_problem: Callable[[str], str | None],
) -> list[tuple[str, str, LaneOptions]]:
    """The lanes of a `[verify]` table: one `command`, or a `lanes` table of them
    (each a command string or a table, forge/plan/lanes.py)."""
    command, lane_table = table.get("command"), table.get("lanes")
    if (command is None) == (lane_table is None):
        problems.add(f"{what}: set exactly one of `command` and `lanes`", line=line_of("verify"))
        return []
    if command is not None:
        if not isinstance(command, str) or not command.strip():
            problems.add(f"{what}: `command` must be a non-empty string", line=line_of("command"))
            return []
        return [("verify", command, LaneOptions())]
    if not isinstance(lane_table, dict) or not lane_table:
        problems.add(f'{what}: `lanes` must be a table of lane = "command"', line=line_of("lanes"))
        return []
    lanes = []
    for lane, value in lane_table.items():
        why = name_problem(lane)
        if why:
            problems.add(f"{what}: lane name `{lane}` is not valid: {why}", line=line_of(lane))
        read = read_lane(lane, value, what=what, problems=problems, line_of=line_of)
        if read is not None:
            lanes.append((lane, *read))
    return lanes


@frozen
class TestsWord:
    """`[tests]` in forge.toml (or a plan's `quarantine` / `release_after`)."""

    quarantine: tuple[str, ...] = ()  # tests a team quarantines by name
    mode: str | None = None  # "auto" or "off"; None: not said here
    release_after: int | None = None


def read_tests(
    value: object, *, what: str, problems: Problems, line_of: Callable[[str], int | None]
) -> TestsWord:
    """`[tests] quarantine = [ids] | "auto" | "off"`, `release_after = N`."""
    if not isinstance(value, dict):
        problems.add(f"{what} must be a table", line=line_of("tests"))
        return TestsWord()
    get = TableReader(value, problems, what=what, line_of=line_of, quote=True)
    for key in sorted(set(value) - set(TESTS_KEYS)):
        get.problem(f"unknown key `{key}` (known: {', '.join(TESTS_KEYS)})", key)
    given = value.get("quarantine")
    mode, names = read_mode(given, get), tuple[str, ...]()
    if isinstance(given, list):
        names = tuple(get.str_list("quarantine", unique=True))
    release = get.integer("release_after", low=1, default=1) if "release_after" in value else None
    return TestsWord(quarantine=names, mode=mode, release_after=release)


def read_mode(given: object, get: TableReader) -> str | None:
    """`quarantine = "auto" | "off"` (None when absent or a list of tests)."""
    if given is None or isinstance(given, list):
        return None
    if given not in QUARANTINE_MODES:
        get.bad("quarantine", '"auto", "off" or a list of test ids')
        return None
    return str(given)


def lane_network(
    lane_table: object, *, what: str, problems: Problems, line_of: Callable[[str], int | None]
) -> tuple[str, ...]:
    """The lanes given as tables (`[verify.lanes.NAME] command = "...", network =
    true`) that keep the network in the sandbox (their other keys: read_lanes)."""
    if not isinstance(lane_table, dict):
        return ()
    out = []
    for lane, entry in lane_table.items():
        if not isinstance(entry, dict):
            continue
        network = entry.get("network", False)
        if not isinstance(network, bool):
            problems.add(
                f"{what}: lane `{lane}`: `network` must be true or false", line=line_of(lane)
            )
        elif network:
            out.append(lane)
    return tuple(out)
