"""forge's pytest plugin, loaded into a lane's pytest with `-p forge_lane_report`
(its folder on PYTHONPATH; see forge/verify/reports.py). It does two things:

- leaves out the tests forge forgives, by their exact node ids (`--deselect` is a
  prefix match: `test_clock` would drop `test_clock_skew` and every
  `test_clock[...]` too), read from FORGE_LANE_DESELECT, one id a line;
- writes each test's outcome, the ids it left out, its counts and the exit status
  to the file descriptor FORGE_LANE_REPORT_FD, once, at the end of the session,
  then closes it: the report has no path a test could rewrite afterwards.

It runs in whatever Python the lane runs, so it imports nothing but the standard
library and pytest, in syntax every supported pytest's Python reads.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

_DESELECT = "FORGE_LANE_DESELECT"
_FD = "FORGE_LANE_REPORT_FD"
_KEY = "forge_lane_deselected"
_RANK = {"error": 0, "failed": 1, "skipped": 2, "passed": 3}  # a test's worst phase
_MESSAGE = 200
_DETAIL = 4000


def _wanted() -> set[str]:
    return {line for line in os.environ.get(_DESELECT, "").split("\n") if line}


class _Report:
    def __init__(self) -> None:
        self.tests: dict[str, list[Any]] = {}  # id -> [outcome, duration, message]
        self.left_out: set[str] = set()
        self.counts: dict[str, int] = {}  # as pytest's closing line counts
        self.details: dict[str, str] = {}  # a failure's whole text (a doctest's says more)

    def count(self, what: str) -> None:
        self.counts[what] = self.counts.get(what, 0) + 1

    def add(self, nodeid: str, outcome: str, duration: float, message: str) -> None:
        had = self.tests.get(nodeid)
        if had is None:
            self.tests[nodeid] = [outcome, duration, message]
            return
        had[1] += duration
        if _RANK[outcome] < _RANK[had[0]]:
            had[0], had[2] = outcome, message


_report = _Report()


def _first_line(longrepr: Any) -> str:
    crash = getattr(longrepr, "reprcrash", None)
    text = str(getattr(crash, "message", None) or longrepr or "")
    for line in text.splitlines():
        if line.strip():
            line = line.strip()
            return line if len(line) <= _MESSAGE else line[: _MESSAGE - 3] + "..."
    return ""


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    wanted = _wanted()
    if not wanted:
        return
    kept: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    for item in items:
        (dropped if item.nodeid in wanted else kept).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept
    _report.left_out.update(item.nodeid for item in dropped)
    out = getattr(config, "workeroutput", None)  # a pytest-xdist worker tells its controller
    if out is not None:
        out[_KEY] = sorted(_report.left_out)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:  # noqa: ARG001 - the hook's
    _report.left_out.update(getattr(node, "workeroutput", {}).get(_KEY, ()))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.skipped:
        outcome = "skipped"
    elif report.failed:
        outcome = "failed" if report.when == "call" else "error"
    else:
        outcome = "passed"
    message = _first_line(report.longrepr) if report.failed else ""
    if report.failed and report.nodeid not in _report.details:
        _report.details[report.nodeid] = str(report.longrepr or "")[:_DETAIL]
    _report.add(report.nodeid, outcome, report.duration, message)
    if report.when == "call" or outcome == "skipped":
        xfail = hasattr(report, "wasxfail")
        what = "xfailed" if xfail and report.skipped else "xpassed" if xfail else outcome
        _report.count(what if outcome != "error" else "failed")
    elif report.failed:
        _report.count("error")


def pytest_collectreport(report: pytest.CollectReport) -> None:
    if report.failed:
        _report.add(report.nodeid or ".", "error", 0.0, _first_line(report.longrepr))
        _report.count("error")


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if hasattr(session.config, "workerinput"):
        return  # a pytest-xdist worker: its controller writes the report
    fd = os.environ.get(_FD)
    if not fd:
        return
    tests = [[t, o, round(d, 4), m] for t, (o, d, m) in _report.tests.items()]
    counts = _report.counts
    body = {
        "version": 1,
        "tests": tests,
        "deselected": sorted(_report.left_out),
        "details": _report.details,
        "counts": counts,
        "exitstatus": int(exitstatus),
    }
    data = json.dumps(body).encode("utf-8", "surrogateescape")
    try:
        while data:
            data = data[os.write(int(fd), data) :]
        os.close(int(fd))
    except (OSError, ValueError):
        pass
