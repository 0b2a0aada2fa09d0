"""Which tests a failing lane's log names, and each one's first error line.

A verdict of "lane unit exit 1" sends people to a log; the test that failed is
what they want. The test runners people use print it in a shape of their own:

    pytest      `FAILED tests/x.py::test_y - AssertionError: ...` (the -r summary),
                `___ test_y ___` sections with their `E   ...` lines
    unittest    `FAIL: test_x (mod.Class.test_x)` then a traceback and its error
    jest        `● Suite › test` blocks (and `✕ test` lines)
    vitest      ` FAIL  file > suite > test` then the error (and `× test` lines)
    go test     `--- FAIL: TestX (0.00s)` and the `file_test.go:12: ...` lines
    cargo test  `---- tests::x stdout ----` blocks, `test tests::x ... FAILED`

A log in none of these shapes gives its last lines that look like errors (with
no test named). Pure: text in, failures out; nothing here runs or reads files.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import field

from forge.frozen import frozen

MAX_FAILURES = 50  # a whole suite failing names its first tests, not all of them
MAX_MESSAGE = 200
MAX_EXCERPT_LINES = 30
_ERROR_LINES = 3  # kept from a log in no runner's shape

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


@frozen
class Failure:
    """One failing test of a lane; `test` is "" when the log names none (then
    `message` is a line of the log that looks like an error)."""

    lane: str
    test: str
    message: str
    # The test's own output in the log, for a retry's prompt; not kept in records.
    excerpt: str = field(default="", compare=False)

    def to_dict(self) -> dict[str, str]:
        return {"lane": self.lane, "test": self.test, "message": self.message}

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> Failure:
        return cls(
            lane=str(data.get("lane", "")),
            test=str(data.get("test", "")),
            message=str(data.get("message", "")),
        )

    def describe(self) -> str:
        """`tests/x.py::test_y (AssertionError: ...)`, or the error line alone."""
        if not self.test:
            return self.message
        return f"{self.test} ({self.message})" if self.message else self.test


def describe(failures: Sequence[Failure]) -> str:
    """The first failure and how many more: what a reason line has room for."""
    if not failures:
        return ""
    more = len(failures) - 1
    return failures[0].describe() + (f" and {more} more" if more else "")


def failures_from_log(lane: str, text: str) -> list[Failure]:
    """The failing tests a lane's log names, in the order the log names them."""
    lines = [_ANSI.sub("", line).rstrip() for line in text.splitlines()]
    for parse in _PARSERS:
        found = parse(lines)
        if found:
            return [_make(lane, *f) for f in _unique(found)[:MAX_FAILURES]]
    return [_make(lane, "", line, "") for line in _error_lines(lines)]


_Found = tuple[str, str, str]  # test, message, excerpt


def _make(lane: str, test: str, message: str, excerpt: str) -> Failure:
    message = message.strip()
    if len(message) > MAX_MESSAGE:
        message = message[: MAX_MESSAGE - 3] + "..."
    return Failure(lane=lane, test=test.strip(), message=message, excerpt=excerpt)


def _unique(found: Iterable[_Found]) -> list[_Found]:
    seen: dict[str, _Found] = {}
    for test, message, excerpt in found:
        if test not in seen:
            seen[test] = (test, message, excerpt)
        elif not seen[test][1] and message:
            seen[test] = (test, message, excerpt or seen[test][2])
    return list(seen.values())


def _excerpt(lines: Sequence[str]) -> str:
    body = list(lines)
    while body and not body[-1].strip():
        body.pop()
    if len(body) > MAX_EXCERPT_LINES:
        body = [
            *body[: MAX_EXCERPT_LINES - 1],
            f"... ({len(body) - MAX_EXCERPT_LINES + 1} more lines)",
        ]
    return "\n".join(body)


def _first(lines: Iterable[str], pred: Callable[[str], bool] = lambda s: bool(s.strip())) -> str:
    return next((line.strip() for line in lines if pred(line)), "")


# --- pytest ---------------------------------------------------------------------

# A node id's parameters may hold spaces: `tests/x.py::test_y[1 Byte]`.
_PY_SUMMARY = re.compile(r"^(FAILED|ERROR) (\S+?(?:\[.*?\])?)(?: - (.*))?$")
_PY_SECTION = re.compile(r"^_{3,} (.+?) _{3,}$")
_PY_BANNER = re.compile(r"^={3,} .* ={3,}$|^={3,}$")


def _pytest_sections(lines: Sequence[str]) -> dict[str, tuple[str, str]]:
    """`___ name ___` section -> (its first `E` line, the section's text)."""
    out: dict[str, tuple[str, str]] = {}
    starts = [i for i, line in enumerate(lines) if _PY_SECTION.match(line)]
    for n, start in enumerate(starts):
        end = starts[n + 1] if n + 1 < len(starts) else len(lines)
        body = list(lines[start + 1 : end])
        cut = next((i for i, line in enumerate(body) if _PY_BANNER.match(line)), len(body))
        body = body[:cut]
        error = _first(body, lambda s: s.startswith("E   ")).removeprefix("E").strip()
        name = _PY_SECTION.match(lines[start])[1]  # type: ignore[index]
        out[name.removeprefix("ERROR collecting ").removeprefix("ERROR at setup of ")] = (
            error,
            _excerpt(body),
        )
    return out


def _section_name(nodeid: str) -> str:
    """`tests/x.py::Class::test_y[1]` -> `Class.test_y[1]`, as pytest heads its section."""
    parts = nodeid.split("::")
    return ".".join(parts[1:]) if len(parts) > 1 else nodeid


def _pytest(lines: Sequence[str]) -> list[_Found]:
    sections = _pytest_sections(lines)
    found: list[_Found] = []
    for line in lines:
        m = _PY_SUMMARY.match(line)
        if not m or ("::" not in m[2] and not m[2].endswith(".py")):
            continue
        nodeid, summary = m[2], m[3] or ""
        error, excerpt = sections.get(_section_name(nodeid)) or sections.get(nodeid) or ("", "")
        # The summary line is cut at the terminal's width ("..."); an E line is not.
        if not error and summary.endswith("..."):
            cut = f"E   {summary[:-3]}"
            error = next((s[1:].strip() for s in lines if s.startswith(cut)), "")
        found.append((nodeid, error or summary, excerpt))
    if found:
        return found
    if not any(_PY_BANNER.match(line) and "FAILURES" in line for line in lines):
        return []
    return [(name, error, excerpt) for name, (error, excerpt) in sections.items()]


# --- unittest -------------------------------------------------------------------

_UT_HEAD = re.compile(r"^(FAIL|ERROR): (\S+) \((\S+?)\)(.*)$")
_UT_RULE = re.compile(r"^(=|-){20,}$")


def _unittest(lines: Sequence[str]) -> list[_Found]:
    found: list[_Found] = []
    for i, line in enumerate(lines):
        m = _UT_HEAD.match(line)
        if not m or i + 1 >= len(lines) or not _UT_RULE.match(lines[i + 1]):
            continue
        body: list[str] = []
        for nxt in lines[i + 2 :]:
            if _UT_RULE.match(nxt):
                break
            body.append(nxt)
        # The error is the traceback's last line that is not indented.
        error = next((b.strip() for b in reversed(body) if b.strip() and not b.startswith(" ")), "")
        if error.startswith("Traceback"):
            error = ""
        # Python 3.11+ names the test `test_x (mod.Class.test_x)`; older ones `(mod.Class)`.
        where = m[3]
        test = where if where.endswith(f".{m[2]}") else f"{where}.{m[2]}"
        test += m[4].rstrip()  # a subTest's parameters: ` (i=1)`
        found.append((test, error, _excerpt(body)))
    return found


# --- jest and vitest ------------------------------------------------------------

_JEST_HEAD = re.compile(r"^\s*● (?!Console$)(.+)$")
_JEST_MARK = re.compile(r"^\s*[✕×] (.+?)(?: \(\d+(?:\.\d+)? ?m?s\)| \d+ ?ms)?$")
_VITEST_FAIL = re.compile(r"^\s*FAIL\s+(\S+ > .+?)(?: \[.*\])?$")
_JS_STACK = re.compile(r"^\s*(at |❯ |\d+\s*\||>\s*\d+\s*\|)")


def _block_after(lines: Sequence[str], start: int, stop: Callable[[str], bool]) -> list[str]:
    body: list[str] = []
    for nxt in lines[start + 1 :]:
        if stop(nxt):
            break
        body.append(nxt)
    return body


def _js(lines: Sequence[str]) -> list[_Found]:
    found: list[_Found] = []
    for i, line in enumerate(lines):
        m = _JEST_HEAD.match(line) or _VITEST_FAIL.match(line)
        if not m:
            continue
        body = _block_after(
            lines,
            i,
            lambda s: bool(
                _JEST_HEAD.match(s) or _VITEST_FAIL.match(s) or s.startswith(("⎯", "Test"))
            ),
        )
        error = _first(body, lambda s: bool(s.strip()) and not _JS_STACK.match(s))
        found.append((m[1].strip(), error, _excerpt(body)))
    if found:
        return found
    for i, line in enumerate(lines):
        m = _JEST_MARK.match(line)
        if m:
            nxt = lines[i + 1].strip() if i + 1 < len(lines) else ""
            found.append((m[1], nxt[1:].strip() if nxt.startswith("→") else "", ""))
    return found


# --- go test --------------------------------------------------------------------

_GO_FAIL = re.compile(r"^\s*--- FAIL: (\S+)")
_GO_RUN = re.compile(r"^=== (RUN|CONT|PAUSE|NAME)\s+(\S+)")
_GO_OUT = re.compile(r"^\s+\S+\.go:\d+: ")


def _go(lines: Sequence[str]) -> list[_Found]:
    found: list[_Found] = []
    for i, line in enumerate(lines):
        m = _GO_FAIL.match(line)
        if not m:
            continue
        name = m[1]
        # Without -v a test's output follows its `--- FAIL` line; with -v it comes
        # between `=== RUN   TestX` and the `--- FAIL`.
        after: list[str] = []
        for nxt in lines[i + 1 :]:
            if not nxt.startswith((" ", "\t")) or _GO_FAIL.match(nxt):
                break
            after.append(nxt)
        before: list[str] = []
        for j in range(i - 1, -1, -1):
            run = _GO_RUN.match(lines[j])
            if run and run[2] == name:
                for nxt in lines[j + 1 : i]:
                    if nxt.startswith("=== ") or _GO_FAIL.match(nxt) or "--- PASS" in nxt:
                        break
                    before.append(nxt)
                break
        body = after if any(_GO_OUT.match(s) for s in after) else before
        own = [s for s in body if _GO_OUT.match(s) or s.startswith("panic:")]
        error = _first(own) or _first(lines[i + 1 :], lambda s: s.startswith("panic:"))
        found.append((name, error, _excerpt(body)))
    # A parent (TestTable) fails because a subtest (TestTable/neg) did: name the subtest.
    names = {f[0] for f in found}
    return [f for f in found if not any(n.startswith(f[0] + "/") for n in names)]


# --- cargo test -----------------------------------------------------------------

_CARGO_HEAD = re.compile(r"^---- (\S+) stdout ----$")
_CARGO_LINE = re.compile(r"^test (\S+) \.\.\. FAILED$")
_CARGO_PANIC = re.compile(r"^thread '.*'(?: \(\d+\))? panicked at (?:'(.*)', \S+|\S+:)$")


def _cargo(lines: Sequence[str]) -> list[_Found]:
    found: list[_Found] = []
    for i, line in enumerate(lines):
        m = _CARGO_HEAD.match(line)
        if not m:
            continue
        body = _block_after(
            lines, i, lambda s: bool(_CARGO_HEAD.match(s)) or s.strip() == "failures:"
        )
        error = ""
        for n, b in enumerate(body):
            panic = _CARGO_PANIC.match(b)
            if panic:
                # Rust 1.73+ prints the message on the line after `panicked at file:l:c:`.
                error = panic[1] or (body[n + 1].strip() if n + 1 < len(body) else "")
                break
        found.append((m[1], error or _first(body), _excerpt(body)))
    if found:
        return found
    return [(m[1], "", "") for line in lines if (m := _CARGO_LINE.match(line))]


# --- a log in no runner's shape -------------------------------------------------

_ERRORISH = re.compile(
    r"\b(error|Error|ERROR|fail|Fail|FAIL|failed|FAILED|fatal|Fatal|panic|Exception|"
    r"Traceback|assert)",
)


def _error_lines(lines: Sequence[str]) -> list[str]:
    hits = [line.strip() for line in lines if _ERRORISH.search(line) and line.strip()]
    hits = [h for h in hits if not h.startswith("forge: ")]
    return list(dict.fromkeys(hits[-_ERROR_LINES:]))


_PARSERS: tuple[Callable[[Sequence[str]], list[_Found]], ...] = (
    _pytest,
    _unittest,
    _cargo,
    _go,
    _js,
)
