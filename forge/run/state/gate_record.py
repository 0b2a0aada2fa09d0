"""The gate's crash record in the run state: the batch under verification, and a
landing's intent, written before the integration ref moves (run/gate/verdicts.py).

A run killed mid-batch leaves the batch's tasks QUEUED; killed mid-landing, the
next run's recovery (run/state/recovery.py) reads the intent to tell whether the
ref did move. Checked against these fields (base/shape.py) when the state is read.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from forge.base.files import JsonObject
from forge.run.state.records import VerifiedBy


class GatePhase(StrEnum):
    """What the gate does with its batch."""

    BUILDING = "building"  # merging its tasks into a candidate chain
    VERIFYING = "verifying"  # verifying the chain's tip
    BISECTING = "bisecting"  # looking for the culprit among its prefixes


@dataclass
class Landing:
    """What a landing moves the integration ref to, and what that lands."""

    to: str  # the tip the integration ref moves to
    tasks: dict[str, str]  # task id -> the commit of the chain that merges it
    verified_by: VerifiedBy | None = None  # the verification covering the tip
    verification: JsonObject | None = None  # its VerifyRecord, as saved
    head: str | None = None  # the integration head it moves from

    @classmethod
    def from_dict(cls, data: JsonObject) -> Landing:
        return cls(
            to=data["to"],
            tasks=dict(data["tasks"]),
            verified_by=VerifiedBy.parse(data.get("verified_by")),
            verification=data.get("verification"),
            head=data.get("head", data.get("from")),  # "from": what forge wrote before
        )

    def to_dict(self) -> JsonObject:
        by = self.verified_by
        return {**vars(self), "verified_by": None if by is None else by.to_dict()}


@dataclass
class GateRecord:
    """The batch the gate verifies now."""

    batch: list[str]  # its tasks, in queue order
    head: str  # the integration head it is built on
    phase: GatePhase = GatePhase.BUILDING
    left: int | None = None  # verifications the bisection may still need
    doing: str | None = None  # what runs now (the whole suite, some failing tests)
    since: float | None = None  # and since when (epoch seconds)
    chain: list[list[str]] = field(default_factory=list)  # [task, candidate commit]
    landing: Landing | None = None  # set just before the ref moves

    @classmethod
    def from_dict(cls, data: JsonObject) -> GateRecord:
        landing = data.get("landing")
        return cls(
            batch=list(data["batch"]),
            head=data["head"],
            phase=GatePhase(data.get("phase", GatePhase.BUILDING)),
            left=data.get("left"),
            doing=data.get("doing"),
            since=data.get("since"),
            chain=[list(step) for step in data.get("chain") or []],
            landing=Landing.from_dict(landing) if landing else None,
        )

    def to_dict(self) -> JsonObject:
        return {
            **vars(self),
            "batch": list(self.batch),
            "chain": [list(step) for step in self.chain],
            "landing": None if self.landing is None else self.landing.to_dict(),
        }
