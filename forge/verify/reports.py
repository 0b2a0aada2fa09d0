"""Where a lane's run leaves its test report, and what forge makes of it.

A lane that names its report (`junit = "path"`, in its checkout) or a pytest
command that writes one (`--junitxml=PATH`) is read there; any other pytest lane
is asked for one by forge, written beside the run's log, outside the checkout.
A report inside the checkout is removed after it is read, so that it is not
counted as the run changing its checkout.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from forge.base import logs as logfiles
from forge.frozen import frozen
from forge.plan.repo_config import VerifyConfig
from forge.verify import junit
from forge.verify.failures import MAX_FAILURES, Failure
from forge.verify.junit import TestOutcome

_TAIL = 64 << 10  # of a log, read for a runner's "no tests ran"
_PYTEST_RAN = re.compile(r"\b[1-9]\d* (passed|failed)\b")


def reports_dir(log: Path) -> Path:
    """The folder of the reports forge asks for in one lane's runs (beside its logs)."""
    return log.parent / "reports"


@frozen
class Report:
    runner: str | None  # the test runner the command runs (None: none forge knows)
    path: Path | None  # where the run's report will be (None: no report)
    ours: bool = False  # forge asks pytest for it
    inside: bool = False  # in the checkout: removed once read
    allow_empty: bool = False

    @classmethod
    def of(cls, config: VerifyConfig, lane: str, command: str, checkout: Path, log: Path) -> Report:
        options = config.options_of(lane)
        runner = junit.runner_of(command)
        allow = options.allow_empty
        if options.junit:
            return cls(runner, checkout / options.junit, inside=True, allow_empty=allow)
        if runner == "pytest":
            own = junit.own_report(command)
            if own is not None:
                path = checkout / own
                return cls(runner, path, inside=path.is_relative_to(checkout), allow_empty=allow)
            path = reports_dir(log) / f"{log.stem}.xml"
            return cls(runner, path, ours=True, allow_empty=allow)
        return cls(runner, None, allow_empty=allow)

    def env(self, env: Mapping[str, str]) -> dict[str, str]:
        if not self.ours or self.path is None:
            return dict(env)
        given = env.get("PYTEST_ADDOPTS", os.environ.get("PYTEST_ADDOPTS"))
        return {**env, "PYTEST_ADDOPTS": junit.pytest_addopts(given, self.path)}

    def clear(self) -> None:
        """No report of an earlier run is taken for this one's."""
        if self.path is None:
            return
        if self.ours:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(OSError):
            self.path.unlink()

    def read(self) -> list[TestOutcome] | None:
        if self.path is None:
            return None
        tests = junit.read_report(self.path)
        if self.inside:
            with contextlib.suppress(OSError):
                self.path.unlink()
        return tests

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
        if self.path is not None and tests is None:
            # pytest run where forge's environment does not reach (a container):
            # its own summary line still tells.
            if self.ours and _PYTEST_RAN.search(tail):
                return ""
            return f"ran no tests (exited 0 without its test report {self.path.name})"
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
