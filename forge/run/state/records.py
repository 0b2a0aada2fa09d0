"""The typed parts of an attempt's and a task's record: a phase, a failing test, a
review, the feedback source, the verification that covered a landing.

Each is parsed once where the state is read (`from_dict`, tolerant of older state
files) and written back in the same JSON shape (`to_dict`, or `str` for the
feedback source); everything between reads fields, not keys.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from forge.frozen import frozen
from forge.verify.failures import Failure

__all__ = [
    "Failure",
    "FeedbackSource",
    "Phase",
    "Review",
    "ReviewVerdict",
    "Source",
    "VerifiedBy",
    "failures_from",
    "phases_from",
]


def _str(value: object) -> str | None:
    return None if value is None else str(value)


def _num(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _strs(value: object) -> list[str] | None:
    return [str(v) for v in value] if isinstance(value, list | tuple) else None


@dataclass
class Phase:
    """One step of an attempt (setup, agent, check, merge, ...), epoch seconds; `end`
    is None while it runs (set in place when it ends)."""

    name: str
    start: float
    end: float | None = None

    @classmethod
    def begin(cls, name: str) -> Phase:
        return cls(name, round(time.time(), 3))

    def close(self) -> None:
        self.end = round(time.time(), 3)

    def to_dict(self) -> dict[str, object]:
        return {"name": self.name, "start": self.start, "end": self.end}

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> Phase:
        return cls(str(data.get("name", "")), _num(data.get("start")) or 0.0, _num(data.get("end")))


def phases_from(data: object) -> list[Phase]:
    if not isinstance(data, list | tuple):
        return []
    return [p if isinstance(p, Phase) else Phase.from_dict(p) for p in data if _is_record(p)]


def failures_from(data: object) -> list[Failure]:
    if not isinstance(data, list | tuple):
        return []
    return [f if isinstance(f, Failure) else Failure.from_dict(f) for f in data if _is_record(f)]


def _is_record(item: object) -> bool:
    return isinstance(item, Mapping | Phase | Failure)


class Source(StrEnum):
    """What failed an attempt: its feedback for the next one."""

    AGENT = "agent"
    CHECK = "check"
    SCOPE = "scope"
    MERGE = "merge"
    REVIEW = "review"
    VERIFY = "verify"  # the gate's verification (a lane of it, when known)
    SELECTION = "selection"  # best-of-N: another candidate was chosen


_JUDGES = frozenset({Source.CHECK, Source.SCOPE, Source.REVIEW, Source.MERGE})


@frozen
class FeedbackSource:
    """What failed an attempt; a verification's failure names its lane. Written as
    `agent`, `check`, ..., `verify:<lane>`."""

    kind: Source
    lane: str | None = None

    __json_shape__ = str  # (forge.base.shape: the state file holds the string)

    def __str__(self) -> str:
        return f"{self.kind}:{self.lane}" if self.lane is not None else str(self.kind)

    @property
    def is_verify(self) -> bool:
        return self.kind == Source.VERIFY

    @property
    def judged(self) -> bool:
        """A judge (the check, the scope, a reviewer, the merge, a verification lane)
        rejected the change: the same change again after it is "no progress". An agent
        that exited non-zero may have made the right change and been cut off, so its
        failure does not count."""
        return self.kind in _JUDGES or (self.kind == Source.VERIFY and self.lane is not None)

    @classmethod
    def verify(cls, lane: str) -> FeedbackSource:
        return cls(Source.VERIFY, lane)

    @classmethod
    def parse(cls, text: object) -> FeedbackSource | None:
        if isinstance(text, FeedbackSource) or text is None:
            return text
        kind, sep, lane = str(text).partition(":")
        try:
            return cls(Source(kind), lane if sep else None)
        except ValueError:
            return cls(Source.AGENT)  # a source this forge does not know: the agent's


AGENT = FeedbackSource(Source.AGENT)
CHECK = FeedbackSource(Source.CHECK)
SCOPE = FeedbackSource(Source.SCOPE)
MERGED = FeedbackSource(Source.MERGE)  # (the merge failed it: a conflict)
REVIEWED = FeedbackSource(Source.REVIEW)


class ReviewVerdict(StrEnum):
    RUNNING = "running"
    APPROVE = "approve"
    REJECT = "reject"
    INFRA = "infra"
    STOPPED = "stopped"


@frozen
class Review:
    """The reviewer's verdict on an attempt (replaced whole, never changed in place:
    another thread may be saving the state)."""

    agent: str
    verdict: ReviewVerdict
    log: str | None = None
    cost_usd: float | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    spent: bool = False  # its CLI reported its usage (the three fields above)
    findings: str | None = None

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {"agent": self.agent, "verdict": str(self.verdict)}
        out["log"] = self.log
        if self.spent:
            out["cost_usd"] = self.cost_usd
            out["input_tokens"] = self.input_tokens
            out["output_tokens"] = self.output_tokens
        if self.findings:
            out["findings"] = self.findings
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> Review:
        try:
            verdict = ReviewVerdict(str(data.get("verdict", "")))
        except ValueError:
            verdict = ReviewVerdict.INFRA
        return cls(
            agent=str(data.get("agent", "?")),
            verdict=verdict,
            log=_str(data.get("log")),
            cost_usd=_num(data.get("cost_usd")),
            input_tokens=_int(data.get("input_tokens")),
            output_tokens=_int(data.get("output_tokens")),
            spent=any(k in data for k in ("cost_usd", "input_tokens", "output_tokens")),
            findings=_str(data.get("findings")),
        )

    @classmethod
    def parse(cls, data: object) -> Review | None:
        if isinstance(data, Review) or data is None:
            return data
        return cls.from_dict(data) if isinstance(data, Mapping) else None


@frozen
class VerifiedBy:
    """The verification that landed (or failed) a task: its record, the commit it
    judged, its verdict, and the tests it passed despite (`quarantined`, `flaky`)."""

    record: str
    commit: str | None
    verdict: str
    summary: str | None = None
    quarantined: list[str] | None = None
    flaky: list[str] | None = None
    # the forgiven tests its whole run left out: {"lane", "test", "why"} each
    deselected: list[dict[str, str]] | None = None

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {
            "record": self.record,
            "commit": self.commit,
            "verdict": self.verdict,
        }
        if self.deselected:
            out["deselected"] = [dict(d) for d in self.deselected]
        if self.summary is not None:
            out["summary"] = self.summary
        if self.quarantined is not None:
            out["quarantined"] = list(self.quarantined)
        if self.flaky is not None:
            out["flaky"] = list(self.flaky)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> VerifiedBy:
        return cls(
            record=str(data.get("record", "")),
            commit=_str(data.get("commit")),
            verdict=str(data.get("verdict", "")),
            summary=_str(data.get("summary")),
            quarantined=_strs(data.get("quarantined")),
            flaky=_strs(data.get("flaky")),
            deselected=_deselected(data.get("deselected")),
        )

    @classmethod
    def parse(cls, data: object) -> VerifiedBy | None:
        if isinstance(data, VerifiedBy) or data is None:
            return data
        return cls.from_dict(data) if isinstance(data, Mapping) else None


def _deselected(data: object) -> list[dict[str, str]] | None:
    if not isinstance(data, list):
        return None
    keys = ("lane", "test", "why")
    return [{k: str(d.get(k, "")) for k in keys} for d in data if isinstance(d, Mapping)]


class _Parts(Protocol):
    feedback_source: FeedbackSource | None
    review: Review | None
    phases: list[Phase]
    failures: list[Failure]


def typed_parts(data: Mapping[str, object]) -> dict[str, object]:
    """An attempt's typed parts, read from its JSON."""
    return {
        "feedback_source": FeedbackSource.parse(data.get("feedback_source")),
        "review": Review.parse(data.get("review")),
        "phases": phases_from(data.get("phases")),
        "failures": failures_from(data.get("failures")),
    }


def json_parts(attempt: _Parts) -> dict[str, object]:
    """An attempt's typed parts, written back as they were read."""
    source, review = attempt.feedback_source, attempt.review
    return {
        "feedback_source": None if source is None else str(source),
        "review": None if review is None else review.to_dict(),
        "phases": [p.to_dict() for p in attempt.phases],  # (a phase's end is set in place)
        "failures": [f.to_dict() for f in attempt.failures],
    }


def by_gate(source: FeedbackSource | None) -> bool:
    """Did the gate's verification fail the attempt whose feedback this is?"""
    return source is not None and source.is_verify
