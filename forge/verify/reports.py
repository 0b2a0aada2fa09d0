"""Where a lane's run leaves its test report, and what forge makes of it.

A pytest lane loads forge's own plugin (forge/verify/pytest_plugin/): it leaves out
the tests forge forgives by their exact ids, and writes each test's outcome to a
file descriptor forge opened, with no path a test could rewrite once it is
written (an unlinked file: the evidence is out of the tested code's reach). Its
counts are checked against pytest's own summary line and exit status; a report
that disagrees is named and ignored. A lane that names its report (`junit =
"path"`, in its checkout) is read there; a pytest command the plugin does not
reach (run in a container) is judged by its log. A report inside the checkout is
removed after it is read, so that it is not counted as the run changing its
checkout.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from forge.base import logs as logfiles
from forge.frozen import frozen
from forge.plan.repo_config import VerifyConfig
from forge.verify import junit
from forge.verify.failures import MAX_FAILURES, Failure
from forge.verify.junit import TestOutcome

_TAIL = 64 << 10  # of a log, read for a runner's "no tests ran"
_PYTEST_RAN = re.compile(r"\b[1-9]\d* (passed|failed)\b")
PLUGIN_DIR = Path(__file__).parent / "pytest_plugin"  # on the lane's PYTHONPATH
PLUGIN = "forge_lane_report"
_REPORT_FD, _DESELECT = "FORGE_LANE_REPORT_FD", "FORGE_LANE_DESELECT"
_REPORT_MAX = 64 << 20
# pytest's closing line: `== 1 failed, 5 passed, 2 deselected in 0.12s ==` (or without
# the rules, under -q)
_SUMMARY = re.compile(
    r"^=*\s*((?:\d+ (?:failed|passed|skipped|deselected|xfailed|xpassed|errors?|warnings?)"
    r"(?:, )?)+) in [\d.]+s",
    re.M,
)


@frozen
class Report:
    runner: str | None  # the test runner the command runs (None: none forge knows)
    path: Path | None  # where the run's report will be (None: no report)
    inside: bool = False  # in the checkout: removed once read
    allow_empty: bool = False
    plugin: bool = False  # forge's pytest plugin reports (and leaves out `deselect`)
    deselect: tuple[str, ...] = ()  # the forgiven tests' exact ids

    @classmethod
    def of(
        cls,
        config: VerifyConfig,
        lane: str,
        command: str,
        checkout: Path,
        deselect: Sequence[str] = (),
    ) -> Report:
        options = config.options_of(lane)
        runner = junit.runner_of(command)
        allow = options.allow_empty
        if options.junit:
            return cls(runner, checkout / options.junit, inside=True, allow_empty=allow)
        if runner == "pytest":
            own = junit.own_report(command)
            path = None if own is None else checkout / own
            inside = path is not None and path.is_relative_to(checkout)
            return cls(
                runner,
                path,
                inside=inside,
                allow_empty=allow,
                plugin=True,
                deselect=tuple(deselect),
            )
        return cls(runner, None, allow_empty=allow)

    def env(self, env: Mapping[str, str], channel: Channel | None) -> dict[str, str]:
        if not self.plugin or channel is None:
            return dict(env)
        given = env.get("PYTEST_ADDOPTS", os.environ.get("PYTEST_ADDOPTS"))
        path = env.get("PYTHONPATH", os.environ.get("PYTHONPATH"))
        return {
            **env,
            "PYTEST_ADDOPTS": f"{given} -p {PLUGIN}" if given else f"-p {PLUGIN}",
            "PYTHONPATH": os.pathsep.join([str(PLUGIN_DIR), *([path] if path else [])]),
            _REPORT_FD: str(channel.fd),
            _DESELECT: "\n".join(self.deselect),
        }

    def clear(self) -> None:
        """No report of an earlier run is taken for this one's."""
        if self.path is None:
            return
        with contextlib.suppress(OSError):
            self.path.unlink()

    def read(self, channel: Channel | None = None) -> list[TestOutcome] | None:
        got = channel.read() if channel is not None else None
        if self.path is None:
            return None if got is None else got.tests
        tests = junit.read_report(self.path)
        if self.inside:
            with contextlib.suppress(OSError):
                self.path.unlink()
        return tests if got is None else got.tests

    def ran_none(self, tests: list[TestOutcome] | None, log: Path, exit_code: int | None) -> str:
        """Why a run ran no test ("" when it ran some, or forge cannot tell): a
        report holding none that ran, a report asked for and not written by a run
        that exited 0, a runner that says so (pytest and unittest by exit code 5)."""
        ran = tests is not None and any(t.outcome != junit.SKIPPED for t in tests)
        if self.runner in ("pytest", "unittest") and exit_code == 5 and not ran:
            return "ran no tests"  # both say "no tests ran" by this exit code
        if exit_code != 0 or (self.runner is None and self.path is None):
            return ""
        tail = logfiles.tail(log, _TAIL)
        if (self.path is not None or self.plugin) and tests is None:
            # pytest run where forge's environment does not reach (a container):
            # its own summary line still tells.
            if self.plugin and _PYTEST_RAN.search(tail):
                return ""
            name = self.path.name if self.path is not None else "forge's test report"
            return f"ran no tests (exited 0 without its test report {name})"
        if junit.ran_no_tests(self.runner, tests, tail):
            return "ran no tests"
        return ""


def failures_of(
    lane: str, tests: Sequence[TestOutcome], parsed: Sequence[Failure]
) -> tuple[Failure, ...]:
    """The failing tests of a run from its report (the log's parse, `parsed`, gives
    each one's output); the parse alone when the report names no failing test."""
    bad = [t for t in tests if t.failed]
    if not bad:
        return tuple(parsed)
    excerpts = {f.test: f.excerpt for f in parsed if f.test}
    short = {test.split("::")[-1]: text for test, text in excerpts.items()}
    return tuple(
        Failure(
            lane=lane,
            test=t.test,
            message=t.message,
            excerpt=excerpts.get(t.test) or short.get(t.test.split("::")[-1], ""),
        )
        for t in bad[:MAX_FAILURES]
    )


def outcomes(tests: Sequence[TestOutcome] | None, failures: Sequence[Failure]) -> list[TestOutcome]:
    """What a run tells the history: its report's tests, else the failing tests its
    log names."""
    if tests is not None:
        return list(tests)
    return [TestOutcome(f.test, junit.FAILED, 0.0, f.message) for f in failures if f.test]


@frozen
class PluginReport:
    """What forge's pytest plugin wrote: each test's outcome, the ids it left out, and
    the exit status it saw."""

    tests: list[TestOutcome]
    deselected: tuple[str, ...]
    exitstatus: int
    counts: dict[str, int]  # as pytest's closing line counts: failed, passed, error, ...

    def failed(self) -> int:
        return sum(t.failed for t in self.tests)


class Channel:
    """The file descriptor a run's plugin writes its report to: an unlinked file,
    so nothing in the run can find it by a path once the plugin closed its copy."""

    def __init__(self) -> None:
        self._file = tempfile.TemporaryFile()  # noqa: SIM115 - closed by close()
        self.problem = ""  # why the report was not believed ("": it was, or none)

    @property
    def fd(self) -> int:
        return self._file.fileno()

    def close(self) -> None:
        self._file.close()

    def read(self) -> PluginReport | None:
        """The report (None: the plugin wrote none, or not one forge reads)."""
        self._file.seek(0)
        data = self._file.read(_REPORT_MAX + 1)
        if not data or len(data) > _REPORT_MAX:
            return None
        try:
            body = json.loads(data.decode("utf-8", "surrogateescape"))
            details = {str(k): str(v) for k, v in dict(body.get("details") or {}).items()}
            tests = [
                TestOutcome(str(t), str(o), float(d), _message(str(m), details.get(str(t), "")))
                for t, o, d, m in body["tests"]
                if o in (junit.PASSED, junit.FAILED, junit.ERROR, junit.SKIPPED)
            ]
            counts = {str(k): int(v) for k, v in dict(body.get("counts") or {}).items()}
            deselected = tuple(str(t) for t in body.get("deselected", ()))
            return PluginReport(tests, deselected, int(body["exitstatus"]), counts)
        except (ValueError, KeyError, TypeError):
            self.problem = "forge's test report is not one it wrote"
            return None


def _message(first: str, detail: str) -> str:
    """A failure's one line: a doctest's says what it ran, expected and got."""
    said = junit.doctest_message(detail) if detail else None
    return (said or first)[: junit.MAX_MESSAGE]


@contextlib.contextmanager
def channel_for(report: Report | None) -> Iterator[Channel | None]:
    """A channel for `report`'s plugin (None: it has no plugin), closed after."""
    if report is None or not report.plugin:
        yield None
        return
    ch = Channel()
    try:
        yield ch
    finally:
        ch.close()


def disagreement(got: PluginReport, log_tail: str, exit_code: int | None) -> str:
    """Why the plugin's report is not to be believed ("": it agrees with pytest's own
    summary line and exit status). A report changed after pytest wrote it, or a
    test that writes one of its own, shows here."""
    failed = got.failed()
    if exit_code is not None and exit_code != got.exitstatus:
        return f"it says pytest exited {got.exitstatus}, and pytest exited {exit_code}"
    if exit_code == 0 and failed:
        return f"it names {failed} failing test(s), and pytest exited 0"
    if exit_code == 1 and not failed:
        return "it names no failing test, and pytest exited 1"
    lines = _SUMMARY.findall(log_tail)
    if not lines:
        return ""
    said: dict[str, int] = {}
    for part in lines[-1].split(", "):
        n, _, what = part.partition(" ")
        said["error" if what.startswith("error") else what] = int(n)
    for what in ("failed", "error", "passed"):
        if said.get(what, 0) != got.counts.get(what, 0):
            return (
                f"it counts {got.counts.get(what, 0)} {what}, "
                f"pytest's summary line {said.get(what, 0)}"
            )
    return ""
