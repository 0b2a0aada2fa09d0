"""What forge knows of a plan's pull request: one file beside the plan's run state
(`pr.json`), written atomically before the action it records (a push is written
as `pushing` first, then `pushed`), read by `forge status` offline.

`verdicts` are the host's word on a pushed head: a failing required check is a
verdict of lane `hosted: NAME` on the pull request's head commit, as tested merged
with its base at the base's commit then."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

from forge.base.clock import now_iso
from forge.base.files import SCHEMA_VERSION, JsonObject, StateDir, read_json_or, write_json
from forge.frozen import frozen
from forge.host.api import Check, CheckState

PR_FILE = "pr.json"


@frozen
class HostedVerdict:
    lane: str  # "hosted: NAME"
    commit: str  # the pull request's head commit (forge's integration head)
    base: str  # the branch it was tested merged with
    summary: str
    url: str
    time: str
    base_sha: str = ""  # the base's commit then: a check judges the head merged with it

    def to_dict(self) -> JsonObject:
        return dict(vars(self))


@dataclass
class PrRecord:
    remote: str
    repo: str  # OWNER/NAME
    branch: str  # the remote branch forge pushes
    base: str
    number: int | None = None
    url: str | None = None
    pushing: str | None = None  # a push forge started (written before it)
    pushed: str | None = None  # what forge last pushed to `branch`: the lease
    state: str | None = None  # open, closed, merged (as last fetched)
    checks: list[Check] = field(default_factory=list)
    review: str | None = None  # APPROVED, CHANGES_REQUESTED (None: no decision)
    mergeable: str | None = None
    merge_commit: str | None = None
    fetched: str | None = None  # when the host was last asked
    verdicts: list[HostedVerdict] = field(default_factory=list)

    def to_dict(self) -> JsonObject:
        return {
            "schema_version": SCHEMA_VERSION,
            **{k: v for k, v in vars(self).items() if k not in ("checks", "verdicts")},
            "checks": [dict(vars(c)) for c in self.checks],
            "verdicts": [v.to_dict() for v in self.verdicts],
        }

    @classmethod
    def from_dict(cls, data: JsonObject) -> PrRecord:
        checks = [
            Check(str(c["name"]), CheckState(c["state"]), str(c["summary"]), str(c["url"]))
            for c in data.get("checks") or []
        ]
        verdicts = [HostedVerdict(**v) for v in data.get("verdicts") or []]
        number = data.get("number")
        return cls(
            remote=str(data["remote"]),
            repo=str(data["repo"]),
            branch=str(data["branch"]),
            base=str(data["base"]),
            number=number if isinstance(number, int) else None,
            checks=checks,
            verdicts=verdicts,
            **{k: _text(data.get(k)) for k in _TEXTS},
        )

    def age(self, now: datetime | None = None) -> str:
        """How long ago the host was last asked: `4m`, `2h`, `3d` ("never")."""
        if not self.fetched:
            return "never"
        then = datetime.fromisoformat(self.fetched)
        seconds = max(0.0, ((now or datetime.now(UTC)) - then).total_seconds())
        for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
            if seconds >= size:
                return f"{int(seconds // size)}{unit}"
        return f"{int(seconds)}s"

    def fetched_now(self) -> PrRecord:
        return replace(self, fetched=now_iso())

    def summary(self) -> str:
        """One line: `#7 open, checks: build failed, test passed; review: APPROVED`."""
        if self.number is None:
            return f"not opened yet (branch {self.branch} on {self.remote})"
        said = [f"#{self.number} {self.state or 'open'}"]
        if self.checks:
            said.append("checks: " + ", ".join(f"{c.name} {c.state}" for c in self.checks))
        elif self.state == "open":
            said.append("no checks reported")
        if self.review:
            said.append(f"review: {self.review}")
        if self.mergeable == "dirty":
            said.append("CONFLICTING with its base")
        return "; ".join(said)


def _text(value: object) -> str | None:
    return None if value is None else str(value)


_TEXTS = (
    "url",
    "pushing",
    "pushed",
    "state",
    "review",
    "mergeable",
    "merge_commit",
    "fetched",
)


def load(state: StateDir, plan: str) -> PrRecord | None:
    data = read_json_or(state.plan_dir(plan) / PR_FILE, None, what="pull request record")
    return None if data is None else PrRecord.from_dict(data)


def save(state: StateDir, plan: str, record: PrRecord) -> None:
    write_json(state.plan_dir(plan) / PR_FILE, record.to_dict())


def merged_upstream(state: StateDir, plan: str, head: str) -> bool:
    """The host merged the pull request whose head was `head`: the plan's work is
    accepted, as a fast-forward of the person's branch would make it."""
    record = load(state, plan)
    return record is not None and record.state == "merged" and record.pushed == head


STACK_FILE = "stack.json"  # `forge pr --per-task`: one record a landed task, in landing order


def load_stack(state: StateDir, plan: str) -> dict[str, PrRecord]:
    data = read_json_or(state.plan_dir(plan) / STACK_FILE, None, what="stacked pull requests")
    entries = data.get("entries") if data else None
    if not isinstance(entries, dict):
        return {}
    return {task: PrRecord.from_dict(rec) for task, rec in entries.items()}


def save_stack(state: StateDir, plan: str, stack: dict[str, PrRecord]) -> None:
    entries = {task: rec.to_dict() for task, rec in stack.items()}
    write_json(
        state.plan_dir(plan) / STACK_FILE, {"schema_version": SCHEMA_VERSION, "entries": entries}
    )
