"""Each test's outcome in a lane's run, from the JUnit XML report its runner writes.

A pytest lane reports through forge's own plugin (forge/verify/reports.py); a
command that writes a report (`--junitxml=PATH`, xunit1 keeping each test's file)
or a lane that names its own (`junit = "path"`) is read from that file.
Test ids are the runner's: pytest's full node id (`tests/x.py::Class::test_y[a b]`).

Which lanes are test runners (pytest, unittest, jest, vitest, go test, cargo test):
a runner that ran no test is not a PASS (see `ran_no_tests`).
"""

from __future__ import annotations

import re
import shlex
import xml.etree.ElementTree as ET
from pathlib import Path

from forge.base.files import JsonObject
from forge.frozen import frozen

PASSED, FAILED, ERROR, SKIPPED = "passed", "failed", "error", "skipped"
_RANK = {ERROR: 0, FAILED: 1, PASSED: 2, SKIPPED: 3}  # a test reported twice: its worst
MAX_MESSAGE = 200


@frozen
class TestOutcome:
    """One test in one run of a lane."""

    __test__ = False  # not a test class, whatever pytest guesses from its name

    test: str  # the runner's full id
    outcome: str  # passed, failed, error, skipped
    duration: float = 0.0
    message: str = ""  # a failure's first line

    @property
    def failed(self) -> bool:
        return self.outcome in (FAILED, ERROR)

    def to_dict(self) -> JsonObject:
        return {"test": self.test, "outcome": self.outcome, "duration": self.duration}


_RUNNERS = {
    "pytest": re.compile(r"(^|[\s/;&|(])(py\.test|pytest)(\s|$)|-m\s+pytest\b"),
    "unittest": re.compile(r"-m\s+unittest\b"),
    "jest": re.compile(r"(^|[\s/])jest(\s|$)"),
    "vitest": re.compile(r"(^|[\s/])vitest(\s|$)"),
    "go": re.compile(r"(^|[\s;&|])go\s+test\b"),
    "cargo": re.compile(r"(^|[\s;&|])cargo\s+(test|nextest)\b"),
}


def runner_of(command: str) -> str | None:
    """The test runner a lane's command runs (None: forge does not recognise one)."""
    return next((name for name, pat in _RUNNERS.items() if pat.search(command)), None)


_OWN_REPORT = re.compile(r"--junit-?xml(?:=|\s+)(\S+)")


def own_report(command: str) -> str | None:
    """The report path a pytest command writes itself (`--junitxml=PATH`), if any."""
    m = _OWN_REPORT.search(command)
    if m is None:
        return None
    try:
        return shlex.split(m[1])[0]
    except ValueError:
        return m[1]


def read_report(path: Path) -> list[TestOutcome] | None:
    """The tests a JUnit XML report names (None: no report, or not one)."""
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        return None
    if root.tag not in ("testsuites", "testsuite"):
        return None
    found: dict[str, TestOutcome] = {}
    for case in root.iter("testcase"):
        outcome = _outcome(case)
        if outcome is None:
            continue
        had = found.get(outcome.test)
        if had is None or _RANK[outcome.outcome] < _RANK[had.outcome]:
            found[outcome.test] = outcome
    return list(found.values())


def _outcome(case: ET.Element) -> TestOutcome | None:
    test = node_id(case.get("classname", ""), case.get("name", ""), case.get("file"))
    if not test:
        return None
    outcome, message = PASSED, ""
    for child in case:
        kind = {"failure": FAILED, "error": ERROR, "skipped": SKIPPED}.get(child.tag)
        if kind is None:
            continue
        if _RANK[kind] < _RANK[outcome] or outcome == PASSED:
            outcome = kind
            text = child.get("message") or (child.text or "").strip()
            message = doctest_message(text) or next(
                (ln.strip() for ln in text.splitlines() if ln.strip()), ""
            )
    try:
        seconds = float(case.get("time") or 0.0)
    except ValueError:
        seconds = 0.0
    if len(message) > MAX_MESSAGE:
        message = message[: MAX_MESSAGE - 3] + "..."
    return TestOutcome(test, outcome, round(seconds, 4), message)


def doctest_message(text: str) -> str | None:
    """A doctest's failure as what it ran, what was expected and what came (pytest's
    message starts with the docstring's first numbered line: `002 Natural list.`)."""
    lines = text.splitlines()
    if "Expected:" in lines and "Got:" in lines:
        at, got = lines.index("Expected:"), lines.index("Got:")
        expected = " ".join(ln.strip() for ln in lines[at + 1 : got] if ln.strip())
        came = []
        for ln in lines[got + 1 :]:
            if not ln.startswith((" ", "\t")):
                break
            came.append(ln.strip())
        what = f"expected {expected or 'nothing'}, got {' '.join(came) or 'nothing'}"
    elif unexpected := [i for i, ln in enumerate(lines) if ln.startswith("UNEXPECTED EXCEPTION")]:
        at = unexpected[0]
        what = "raised " + lines[at].partition(":")[2].strip()
    else:
        return None
    ran = [ln.split(">>> ", 1)[1].strip() for ln in lines[:at] if ">>> " in ln]
    return f"{ran[-1]}: {what}" if ran else what


def node_id(classname: str, name: str, file: str | None) -> str:
    """pytest's node id from an xunit1 test case (`file` given: `tests/x.py`,
    classname `tests.x.Class`); else `classname.name` as other runners report it."""
    if file and file.endswith(".py"):
        module = file[:-3].replace("/", ".").replace("\\", ".")
        rest = classname[len(module) + 1 :] if classname.startswith(module + ".") else ""
        return "::".join([file, *(p for p in rest.split(".") if p), name])
    if not classname:
        return name
    return f"{classname}.{name}" if name else classname


# --- a runner that ran no test ----------------------------------------------------

_NONE_IN_LOG = {
    "pytest": re.compile(r"^=+ no tests ran|^no tests ran", re.M),
    "unittest": re.compile(r"^Ran 0 tests", re.M),
    "jest": re.compile(r"^No tests found", re.M),
    "vitest": re.compile(r"No test files found", re.M),
    "go": re.compile(r"no test files|testing: warning: no tests to run", re.M),
    "cargo": re.compile(r"^running 0 tests$", re.M),
}
_SOME_IN_LOG = {
    "go": re.compile(r"^(ok|---) ", re.M),
    "cargo": re.compile(r"^running [1-9]\d* tests?$", re.M),
}


def ran_no_tests(runner: str | None, tests: list[TestOutcome] | None, log_tail: str) -> bool:
    """Whether a run that exited 0 ran no test: its report holds none that passed
    or failed, or (without a report) its runner says so in its log."""
    if tests is not None:
        return not any(t.outcome != SKIPPED for t in tests)
    if runner is None or runner not in _NONE_IN_LOG:
        return False
    some = _SOME_IN_LOG.get(runner)
    if some is not None and some.search(log_tail):
        return False
    return bool(_NONE_IN_LOG[runner].search(log_tail))
