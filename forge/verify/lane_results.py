"""What a verification's lanes came to: each run of a lane (`LaneRun`), each lane's
result (`LaneResult`) and the verdicts (`Verdict`), worst first. Stored whole in a
verification record (forge/verify/records.py)."""

from __future__ import annotations

import enum

from forge.base.files import JsonObject
from forge.frozen import frozen
from forge.verify.failures import Failure, describe


class Verdict(enum.StrEnum):
    """Worst first, for a lane and for a verification (the worst of its lanes).

    FAIL outranks INTERRUPTED: a lane that failed for good before the stop is a fact
    about the commit, and stopping the other lanes does not unmake it.
    """

    FAIL = "FAIL"
    INTERRUPTED = "INTERRUPTED"
    EMPTY = "EMPTY"  # a test runner that ran no test: blames nobody, lands nothing
    FLAKY = "FLAKY"
    PASS = "PASS"
    UNVERIFIED = "UNVERIFIED"

    @property
    def ok(self) -> bool:
        """Good enough to land (and exit 0)."""
        return self in (Verdict.PASS, Verdict.FLAKY, Verdict.UNVERIFIED)


_ORDER = [Verdict.FAIL, Verdict.INTERRUPTED, Verdict.EMPTY, Verdict.FLAKY, Verdict.PASS]


def worst(verdicts: list[Verdict]) -> Verdict:
    return min(verdicts, key=_ORDER.index) if verdicts else Verdict.UNVERIFIED


_SHOWN = 5  # failing tests a lane lists by name


def _listed(tests: tuple[str, ...]) -> str:
    more = len(tests) - 3
    return ", ".join(tests[:3]) + (f" and {more} more" if more > 0 else "")


@frozen
class LaneRun:
    kind: str  # "initial", "rerun", "setup" (the plan's setup in the checkout failed)
    # or "checkout" (git could not make the commit's files)
    exit_code: int | None
    duration: float
    changed: tuple[str, ...]  # paths the run changed in the checkout
    log: str
    timed_out: bool = False
    stopped: bool = False
    timeout: float | None = None  # the time limit it ran under
    failures: tuple[Failure, ...] = ()  # the failing tests its log names
    tests: int | None = None  # tests its report says ran (None: no report)
    quarantined: tuple[str, ...] = ()  # its failing tests that were quarantined
    # its failing tests that passed when the gate ran them again on the same tree
    flaky: tuple[str, ...] = ()
    empty: str = ""  # why a run that exited 0 is not a pass ("ran no tests")
    allowed_empty: bool = False  # it ran no test, and its lane says `allow_empty`
    deselected: tuple[str, ...] = ()  # forgiven tests it left out, by their exact ids
    # a failing exit that only forgiven tests' failures would explain, which this lane
    # could not leave out: why it is still a failure
    unexplained: str = ""
    report_problem: str = ""  # why its test report was not believed

    def to_dict(self) -> JsonObject:
        extra: JsonObject = {}
        if self.deselected:
            extra["deselected"] = list(self.deselected)
        if self.unexplained:
            extra["unexplained"] = self.unexplained
        if self.report_problem:
            extra["report_problem"] = self.report_problem
        if self.tests is not None:
            extra["tests"] = self.tests
        if self.quarantined:
            extra["quarantined"] = list(self.quarantined)
        if self.flaky:
            extra["flaky"] = list(self.flaky)
        if self.empty:
            extra["empty"] = self.empty
        if self.allowed_empty:
            extra["allowed_empty"] = True
        return extra | {
            "kind": self.kind,
            "exit_code": self.exit_code,
            "duration": round(self.duration, 3),
            "changed": list(self.changed),
            "log": self.log,
            "timed_out": self.timed_out,
            "stopped": self.stopped,
            "timeout": self.timeout,
            "failures": [f.to_dict() for f in self.failures],
        }

    @property
    def outcome(self) -> str:
        if self.stopped:
            return "stopped"
        if self.timed_out:
            return "timed out"
        return f"exit {self.exit_code}"

    @classmethod
    def from_dict(cls, data: JsonObject) -> LaneRun:
        code = data.get("exit_code")
        return cls(
            kind=str(data["kind"]),
            exit_code=None if code is None else int(code),
            duration=float(data.get("duration", 0.0)),
            changed=tuple(data.get("changed", ())),
            log=str(data.get("log", "")),
            timed_out=bool(data.get("timed_out", False)),
            stopped=bool(data.get("stopped", False)),
            timeout=None if data.get("timeout") is None else float(data["timeout"]),
            failures=tuple(Failure.from_dict(f) for f in data.get("failures") or ()),
            tests=None if data.get("tests") is None else int(data["tests"]),
            quarantined=tuple(str(t) for t in data.get("quarantined") or ()),
            flaky=tuple(str(t) for t in data.get("flaky") or ()),
            empty=str(data.get("empty") or ""),
            allowed_empty=bool(data.get("allowed_empty", False)),
            deselected=tuple(str(t) for t in data.get("deselected") or ()),
            unexplained=str(data.get("unexplained") or ""),
            report_problem=str(data.get("report_problem") or ""),
        )


@frozen
class LaneResult:
    name: str
    command: str
    verdict: Verdict
    runs: tuple[LaneRun, ...]
    # why each test forgiven in this lane was (quarantined, already failing on the
    # head): (test, why), those its last run left out
    forgiven: tuple[tuple[str, str], ...] = ()

    @property
    def deselected(self) -> tuple[tuple[str, str], ...]:
        """(test, why) of each forgiven test its last run left out."""
        if not self.runs:
            return ()
        left = set(self.runs[-1].deselected)
        return tuple((t, why) for t, why in self.forgiven if t in left)

    @property
    def reason(self) -> str:
        last = self.runs[-1] if self.runs else None
        if last is None:
            return "not started"
        if last.kind == "setup":
            why = (
                f"wrote or deleted paths git does not ignore: {', '.join(last.changed[:8])}"
                if last.changed
                else "timed out (setup_timeout)"
                if last.timed_out
                else f"exit {last.exit_code}"
            )
            return f"setup failed in its checkout: {why}"
        if last.kind == "checkout":
            return f"could not check the commit out: {describe(last.failures)}"
        if last.changed:
            return f"changed the checkout: {', '.join(last.changed[:8])}"
        if last.empty:
            return last.empty
        if last.unexplained:
            return last.unexplained
        if self.verdict in (Verdict.PASS, Verdict.FLAKY) and self.named:
            return self.named
        if last.timed_out and not last.stopped:
            limit = last.duration if last.timeout is None else last.timeout
            return f"timed out after {limit:g}s"
        if any(f.test for f in last.failures):
            return describe(last.failures)
        if last.failures:  # a log in no runner's shape: its last error line
            return f"{last.outcome}: {last.failures[-1].message}"
        return last.outcome

    @property
    def quarantined(self) -> tuple[str, ...]:
        """Quarantined tests that failed in its last run (it passed without them)."""
        if not self.runs or self.verdict not in (Verdict.PASS, Verdict.FLAKY):
            return ()
        return self.runs[-1].quarantined

    @property
    def flaky_tests(self) -> tuple[str, ...]:
        """For FLAKY: the tests that failed in a run before the one that passed; and
        those of its last run that passed when the gate ran them again."""
        again = list(self.runs[-1].flaky) if self.runs else []
        if self.verdict != Verdict.FLAKY:
            return tuple(again)
        seen = [f.test for run in self.runs[:-1] for f in run.failures if f.test]
        return tuple(t for t in dict.fromkeys([*seen, *again]) if t not in self.quarantined)

    @property
    def named(self) -> str:
        """`2 deselected: T (quarantined), U (already failing on the head); flaky: V`
        for a lane that passed without or despite them."""
        parts = []
        if self.deselected:
            shown = tuple(f"{t} ({why})" for t, why in self.deselected)
            parts.append(f"{len(shown)} deselected: {_listed(shown)}")
        if self.quarantined:
            parts.append(f"quarantined: {_listed(self.quarantined)} failed")
        if self.flaky_tests:
            parts.append(f"flaky: {_listed(self.flaky_tests)}")
        return "; ".join(parts)

    @property
    def names_tests(self) -> bool:
        """Does its reason name failing tests (so the log's path need not lead)?"""
        return any(f.test for f in self.failures)

    @property
    def failures(self) -> tuple[Failure, ...]:
        """The failing tests of its last run (a FAIL's, the one that decided it)."""
        return self.runs[-1].failures if self.runs and self.verdict == Verdict.FAIL else ()

    def lines(self) -> list[str]:
        """The lane as people read it (`forge verify`, `forge status`, a run's report)."""
        runs = len(self.runs)
        said = (
            f", {self.named or self.reason}" if self.named or self.verdict == Verdict.EMPTY else ""
        )
        out = [f"lane {self.name}: {self.verdict} ({runs} run{'s' if runs != 1 else ''}{said})"]
        for run in self.runs:
            out.append(f"  {run.kind}: {run.outcome} in {run.duration:.1f}s, log {run.log}")
            if run.changed:
                out.append(f"    changed the checkout: {', '.join(run.changed)}")
        shown = self.failures[:_SHOWN]
        out += [f"    failed: {f.describe()}" for f in shown]
        if len(self.failures) > len(shown):
            out.append(f"    and {len(self.failures) - len(shown)} more failing tests")
        return out
