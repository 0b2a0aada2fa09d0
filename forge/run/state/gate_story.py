"""What the gate tells of its verifications, as typed records of the run state
(forge/run/gate/story.py writes them): each verification it ran (`GateStep`), its
last one that landed nothing (`GateLast`), and the tests the integration head fails
on its own and those landed work fixed (`PreExisting`).

Parsed once when the state is read and written back in the shape of the state file
(`to_dict`); a record an older forge wrote reads with what it holds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from forge.frozen import frozen


def _str(value: object) -> str | None:
    return None if value is None else str(value)


def _num(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _strs(value: object) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list | tuple) else []


def _items(value: object) -> list[Mapping[str, object]]:
    return [v for v in value if isinstance(v, Mapping)] if isinstance(value, list) else []


class StepKind(StrEnum):
    """What a verification of the gate judged."""

    BATCH = "batch"  # a batch's candidate tip
    BISECTION = "bisection"  # a prefix of a failing batch
    SPECULATION = "speculation"  # a batch built on a candidate still being judged
    SUBSET = "subset"  # some tests only (a rerun, the head's, a culprit's again)
    PREFIX = "prefix"  # the whole run of the prefix a bisection by tests would land


@frozen
class GateFailure:
    """A failing test of a verification (`test` "" when its lane's log names none)."""

    lane: str
    test: str = ""
    message: str = ""
    log: str | None = None

    def to_dict(self) -> dict[str, object]:
        return {"lane": self.lane, "test": self.test, "message": self.message, "log": self.log}

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> GateFailure:
        return cls(
            lane=str(data.get("lane", "")),
            test=str(data.get("test") or ""),
            message=str(data.get("message") or ""),
            log=_str(data.get("log")),
        )

    def text(self) -> str:
        """`unit tests/x.py::test_y: AssertionError`."""
        return (
            self.lane
            + (f" {self.test}" if self.test else "")
            + (f": {self.message}" if self.message else "")
        )


@dataclass
class GateStep:
    """One verification the gate ran: its verdict, candidate, tasks, failing tests
    and logs. `name` is what the report shows (a subset's: why it ran)."""

    kind: StepKind
    name: str
    start: float
    end: float | None
    verdict: str
    commit: str | None = None
    __json_shape__ = dict  # (forge.base.shape: read by from_dict, which is tolerant)

    record: str | None = None
    tasks: list[str] = field(default_factory=list)
    runs: int = 0
    failures: list[GateFailure] = field(default_factory=list)
    logs: dict[str, str] = field(default_factory=dict)  # lane -> its last run's log
    run: int | None = None  # the invocation of the run it belongs to
    cleared: list[str] = field(default_factory=list)  # tasks it blamed whose blame was given back

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {
            "name": self.name,
            "start": self.start,
            "end": self.end,
            "verdict": self.verdict,
            "commit": self.commit,
            "record": self.record,
            "tasks": list(self.tasks),
            "runs": self.runs,
            "failures": [f.to_dict() for f in self.failures],
            "logs": dict(self.logs),
        }
        if self.run is not None:
            out["run"] = self.run
        if self.cleared:
            out["cleared"] = list(self.cleared)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> GateStep:
        name = str(data.get("name", "step"))
        runs, run, logs = data.get("runs"), data.get("run"), data.get("logs")
        return cls(
            kind=StepKind(name) if name in _KINDS else StepKind.SUBSET,
            name=name,
            start=_num(data.get("start")) or 0.0,
            end=_num(data.get("end")),
            verdict=str(data.get("verdict", "?")),
            commit=_str(data.get("commit")),
            record=_str(data.get("record")),
            tasks=_strs(data.get("tasks")),
            runs=runs if isinstance(runs, int) else 0,
            failures=[GateFailure.from_dict(f) for f in _items(data.get("failures"))],
            logs={str(k): str(v) for k, v in logs.items()} if isinstance(logs, Mapping) else {},
            run=run if isinstance(run, int) else None,
            cleared=_strs(data.get("cleared")),
        )

    def tip(self) -> str:
        """Its bar's tooltip in the report: what it judged and what came of it."""
        tasks = ", ".join(self.tasks) or "the integration head"
        tests = "; ".join(f.text() for f in self.failures)
        return f"{self.name}: {self.verdict} of {tasks}" + (f"\nfailing: {tests}" if tests else "")


_KINDS = frozenset(str(k) for k in StepKind)


def steps_from(data: object) -> list[GateStep]:
    return [GateStep.from_dict(s) for s in _items(data)]


@frozen
class GateLast:
    """The gate's last verification that landed nothing: INTERRUPTED (which step of
    which batch; its tasks stay QUEUED) or FAIL (the candidate, the culprit, or none
    when the head fails on its own, and the failing tests)."""

    verdict: str
    at: float
    batch: list[str]
    __json_shape__ = dict
    step: str
    commit: str | None
    tasks: list[str]
    record: str | None = None
    culprit: str | None = None
    failures: list[GateFailure] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        return {
            "verdict": self.verdict,
            "at": self.at,
            "batch": list(self.batch),
            "step": self.step,
            "commit": self.commit,
            "tasks": list(self.tasks),
            "record": self.record,
            "culprit": self.culprit,
            "failures": [f.to_dict() for f in self.failures],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> GateLast:
        return cls(
            verdict=str(data.get("verdict", "")),
            at=_num(data.get("at")) or 0.0,
            batch=_strs(data.get("batch")),
            step=str(data.get("step", "")),
            commit=_str(data.get("commit")),
            tasks=_strs(data.get("tasks")),
            record=_str(data.get("record")),
            culprit=_str(data.get("culprit")),
            failures=[GateFailure.from_dict(f) for f in _items(data.get("failures"))],
        )

    @classmethod
    def parse(cls, data: object) -> GateLast | None:
        if isinstance(data, GateLast):
            return data
        return cls.from_dict(data) if isinstance(data, Mapping) and data else None


@frozen
class LaneTest:
    """A test of a lane; `by`: the tasks whose landing fixed it (a fix only)."""

    lane: str
    test: str
    by: list[str] | None = None

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {"lane": self.lane, "test": self.test}
        if self.by is not None:
            out["by"] = list(self.by)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> LaneTest:
        by = data.get("by")
        return cls(
            lane=str(data.get("lane", "")),
            test=str(data.get("test", "")),
            by=_strs(by) if by is not None else None,
        )


@frozen
class PreExisting:
    """The tests the integration head (at `head`) fails on its own, which blame no
    task, and those landed work fixed since."""

    head: str | None
    tests: list[LaneTest]
    fixed: list[LaneTest]
    __json_shape__ = dict

    def to_dict(self) -> dict[str, object]:
        return {
            "head": self.head,
            "tests": [t.to_dict() for t in self.tests],
            "fixed": [t.to_dict() for t in self.fixed],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> PreExisting:
        return cls(
            head=_str(data.get("head")),
            tests=[LaneTest.from_dict(t) for t in _items(data.get("tests"))],
            fixed=[LaneTest.from_dict(t) for t in _items(data.get("fixed"))],
        )

    @classmethod
    def parse(cls, data: object) -> PreExisting | None:
        if isinstance(data, PreExisting):
            return data
        return cls.from_dict(data) if isinstance(data, Mapping) and data else None
