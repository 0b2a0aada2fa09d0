"""Reading TOML tables people write: every problem at once, each with file and line.

tomllib reports lines only for syntax errors, so `TomlSource` finds key and table
lines again in the text. `Problems` collects `FILE[:LINE]: message` lines; a
`TableReader` reads one table's values by type and records a problem (with the
key's line) instead of raising, so one pass reports every mistake. Plans,
`forge.toml` and `[agents.NAME]` tables are all read through these.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from forge.base.durations import parse_duration
from forge.base.files import JsonObject
from forge.base.logs import parse_size
from forge.errors import PlanError

LineOf = Callable[[str], int | None]  # a key's line in the file (None: not found)


def no_lines(_key: str) -> int | None:
    return None


class TomlSource:
    """A TOML file's text, to point a problem at a line."""

    _HEADER = re.compile(r"^\s*\[")

    def __init__(self, text: str) -> None:
        self.lines = text.splitlines()
        # A line that starts inside a multi-line string is text, not TOML: a
        # `[[task]]` in a prompt is no table header and `timeout = 1` no key.
        self._in_string = _lines_inside_strings(self.lines)
        self._tables: dict[str, list[int]] = {}  # name -> its header lines, found once

    def _find(self, pattern: re.Pattern[str], start: int = 0, end: int | None = None) -> int | None:
        for i in range(start, len(self.lines) if end is None else end):
            if not self._in_string[i] and pattern.match(self.lines[i]):
                return i + 1
        return None

    def table_line(self, name: str, nth: int = 0) -> int | None:
        """The line of the `nth` `[name]` or `[[name]]` header (1-based), or None."""
        # Found once per name: a plan of 1000 tasks asks for each task's header.
        found = self._tables.get(name)
        if found is None:
            pattern = re.compile(r"^\s*\[\[?\s*" + re.escape(name) + r"\s*\]\]?\s*(#.*)?$")
            found = [
                i + 1
                for i, line in enumerate(self.lines)
                if not self._in_string[i] and pattern.match(line)
            ]
            self._tables[name] = found
        return found[nth] if nth < len(found) else None

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

    def table_keys(self, table: str, fallback: int | None = None) -> LineOf:
        """Lines of the keys of table `table` (`agents.mine`): the key's own line,
        else the table's header, else `fallback`."""
        header = self.table_line(table)

        def line_of(key: str) -> int | None:
            found = self.key_line(key.split(".")[0], header) if header else None
            return found or header or fallback

        return line_of


_QUOTES = ('"""', "'''", '"', "'")


def _lines_inside_strings(lines: list[str]) -> list[bool]:
    """For each line, whether it starts inside a multi-line string (three quotes)."""
    inside: list[bool] = []
    quote: str | None = None  # the open multi-line string's delimiter
    for line in lines:
        inside.append(quote is not None)
        i = 0
        while i < len(line):
            if quote is not None:
                end = _closing(line, i, quote)
                if end < 0:
                    break  # the string goes on past this line
                quote, i = None, end
                continue
            if line[i] == "#":
                break
            if line[i : i + 3] in ('"""', "'''"):
                quote, i = line[i : i + 3], i + 3
            elif line[i] in "\"'":
                i = _string_end(line, i)
            else:
                i += 1
    return inside


# What ends a string, or what a backslash escapes (in a basic string), found at
# once: a plan's command may be megabytes long.
_ENDS = {q: re.compile(r"\\.|" + q, re.S) if q[0] == '"' else re.compile(q) for q in _QUOTES}


def _closing(line: str, start: int, quote: str) -> int:
    """The index after the `quote` that closes a string at or after `start` (a
    backslash escapes the next character in a basic string); -1: none on this line."""
    pattern = _ENDS[quote]
    while (m := pattern.search(line, start)) is not None:
        if m.group() == quote:
            return m.end()
        start = m.end()
    return -1


def _string_end(line: str, start: int) -> int:
    """The index after the one-line string opening at `start`."""
    end = _closing(line, start + 1, line[start])
    return len(line) if end < 0 else end


@dataclass
class Problems:
    """Every problem found in one file, each a line `FILE[:LINE]: message` (just the
    message when there is no file: a table recorded in a plan's JSON)."""

    path: str | None
    items: list[str] = field(default_factory=list)

    def add(self, message: str, *, line: int | None = None) -> None:
        if self.path is None:
            self.items.append(message)
            return
        where = self.path if line is None else f"{self.path}:{line}"
        self.items.append(f"{where}: {message}")

    def raise_if_any(self) -> None:
        if self.items:
            raise PlanError(self.items)


class TableReader:
    """Typed reads of one TOML table that record a problem instead of raising.

    Each problem reads `{what}: {key} must be ...`, at the key's line; with `quote`,
    the key is in backquotes (a plan's keys are named so)."""

    def __init__(
        self,
        table: Mapping[str, object],
        problems: Problems,
        *,
        what: str,
        line_of: LineOf = no_lines,
        quote: bool = False,
    ) -> None:
        self.table = table
        self.problems = problems
        self.what = what
        self.line_of = line_of
        self.quote = quote

    def name(self, key: str) -> str:
        return f"`{key}`" if self.quote else key

    def problem(self, message: str, key: str | None = None) -> None:
        line = self.line_of(key) if key is not None else self.line_of("")
        self.problems.add(f"{self.what}: {message}" if self.what else message, line=line)

    def bad(self, key: str, want: str) -> None:
        self.problem(f"{self.name(key)} must be {want}", key)

    def unknown_keys(self, known: tuple[str, ...]) -> None:
        for key in sorted(set(self.table) - set(known)):
            self.problem(f"unknown key {key} (known: {', '.join(known)})", key)

    def string(self, key: str) -> str | None:
        value = self.table.get(key)
        if value is None:
            return None
        if isinstance(value, str) and value.strip():
            return value
        self.bad(key, "a non-empty string")
        return None

    def integer(self, key: str, *, low: int, default: int) -> int:
        value = self.table.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int):
            self.bad(key, f"a whole number, got {value!r}")
            return default
        if value < low:
            self.bad(key, f"at least {low}, got {value}")
            return default
        return value

    def one_of(self, key: str, options: tuple[str, ...]) -> str:
        """One of `options` (the first when the key is left out)."""
        value = self.table.get(key, options[0])
        if value not in options:
            self.bad(key, " or ".join(f'"{o}"' for o in options) + f", got {value!r}")
            return options[0]
        return str(value)

    def size(self, key: str) -> int | None:
        """Bytes, from a number or "64K", "50M", "1G"."""
        if key not in self.table:
            return None
        try:
            return parse_size(self.table[key])
        except ValueError as exc:
            self.problem(f"{self.name(key)}: {exc}", key)
            return None

    def flag(self, key: str) -> bool:
        value = self.table.get(key, False)
        if isinstance(value, bool):
            return value
        self.bad(key, "true or false")
        return False

    def str_list(self, key: str, *, nonempty: bool = False, unique: bool = False) -> list[str]:
        value = self.table.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            self.bad(key, "a list of non-empty strings")
            return []
        if nonempty and not value:
            self.bad(key, "a non-empty list of strings")
        if unique and len(set(value)) != len(value):
            self.bad(key, "a list without repeats")
        return list(value)

    def ports(self, key: str) -> tuple[int, ...]:
        """TCP port numbers (1 to 65535), each once."""
        value = self.table.get(key, [])
        if not isinstance(value, list) or not all(
            isinstance(v, int) and not isinstance(v, bool) and 0 < v < 65536 for v in value
        ):
            self.bad(key, "a list of port numbers (1 to 65535)")
            return ()
        if len(set(value)) != len(value):
            self.bad(key, "a list without repeats")
        return tuple(dict.fromkeys(value))

    def str_map(self, key: str) -> dict[str, str]:
        value = self.table.get(key, {})
        if not isinstance(value, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in value.items()
        ):
            self.bad(key, 'a table of strings, e.g. {NAME = "value"}')
            return {}
        return dict(value)

    def choice(self, key: str, allowed: list[str], ladder: str) -> str | None:
        value = self.string(key)
        if value is not None and value not in allowed:
            self.problem(f"{key} {value!r} is not in {ladder} ({', '.join(allowed)})", key)
            return None
        return value

    def duration(self, key: str) -> float | None:
        value = self.table.get(key)
        if value is None:
            return None
        try:
            return parse_duration(value)
        except ValueError:
            self.bad(
                key,
                'a duration like "30m", "90s", "1h30m" or "500ms", or a number of seconds, '
                f"got {value!r}",
            )
            return None


def parse_toml(text: str, problems: Problems) -> JsonObject:
    """`text` parsed, or every problem with it raised (PlanError): a syntax error at
    its line, nesting deeper than the parser goes, a NUL character in a string
    (no command, argument or file name can carry one)."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        m = re.search(r"at line (\d+)", str(exc))
        problems.add(f"TOML syntax error: {exc}", line=int(m.group(1)) if m else None)
    except RecursionError:
        problems.add("TOML nested too deep to read")
    else:
        for where in _holding_nul(data):
            problems.add(f"{where} holds a NUL character, which no command can carry")
        problems.raise_if_any()
        return data
    problems.raise_if_any()
    raise AssertionError("unreachable")


def _holding_nul(data: object) -> list[str]:
    """The keys (dotted, `task[2].run`) of the strings in `data` that hold a NUL."""
    found = []
    todo: list[tuple[str, object]] = [("", data)]
    while todo:
        where, value = todo.pop()
        if isinstance(value, str) and "\0" in value:
            found.append(f"`{where}`")
        elif isinstance(value, dict):
            todo += [(f"{where}.{k}" if where else str(k), v) for k, v in value.items()]
            found += [f"the key {k!r}" for k in value if "\0" in str(k)]
        elif isinstance(value, list):
            todo += [(f"{where}[{i + 1}]", v) for i, v in enumerate(value)]
    return sorted(found)
