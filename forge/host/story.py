"""The pull request's body: the run's story, told from its state.

The tasks with their verdicts and costs, the verification that let the head land
(with what it forgave: quarantined tests, tests already failing on the head), and
what did not land and why. Task output is data: reasons are quoted, never markup."""

from __future__ import annotations

from forge.git.repo import short_sha
from forge.run.state.run_state import RunState, Status, TaskState, counted

MARKER = "<!-- forge:plan {plan} -->"


def title_of(state: RunState) -> str:
    landed = sum(1 for t in state.tasks.values() if t.status == Status.MERGED)
    return f"forge: plan {state.plan} ({landed} of {len(state.tasks)} task(s))"


def body_of(state: RunState, head: str) -> str:
    out = [MARKER.format(plan=state.plan), ""]
    record = state.verification
    verdict = record.summary if record is not None else "not verified"
    out.append(
        f"The verified head of plan `{state.plan}` ({short_sha(head)}), landed by forge's "
        f"gate: verification {_quote(verdict)}."
    )
    out += ["", "| task | verdict | attempts | cost | note |", "| --- | --- | --- | --- | --- |"]
    total = 0.0
    for ts in state.tasks.values():
        cost = _cost(ts)
        total += cost or 0.0
        shown = f"${cost:.2f}" if cost is not None else "-"
        note = _quote(ts.reason) if ts.status != Status.MERGED else ""
        out.append(f"| `{ts.id}` | {ts.status} | {counted(ts.attempts)} | {shown} | {note} |")
    out += ["", f"Spent: ${total:.2f}."]
    forgiven = _forgiven(state)
    if forgiven:
        out += ["", "Forgiven by the gate (they blame no task):", *forgiven]
    missing = [t for t in state.tasks.values() if t.status != Status.MERGED]
    if missing:
        out += ["", "Not landed:"]
        out += [f"- `{t.id}` {t.status}: {_quote(t.reason) or 'not run'}" for t in missing]
    out += ["", "Opened by `forge pr`; updated in place by later runs."]
    return "\n".join(out) + "\n"


def task_body(state: RunState, ts: TaskState, parent: str) -> str:
    """A stacked pull request's body: its task's line of the story."""
    cost = _cost(ts)
    shown = f"${cost:.2f}" if cost is not None else "-"
    return (
        f"{MARKER.format(plan=state.plan)}\n\nTask `{ts.id}` of plan `{state.plan}`: "
        f"{ts.status}, {counted(ts.attempts)} attempt(s), {shown}; landed by forge's gate "
        f"and stacked on `{parent}`.\n\nOpened by `forge pr --per-task`; updated in place.\n"
    )


def _forgiven(state: RunState) -> list[str]:
    out: list[str] = []
    if state.pre_existing is not None:
        out += [
            f"- already failing on the head: `{t.test}` (lane {t.lane})"
            for t in state.pre_existing.tests
        ]
    if state.verification is not None:
        for lane in state.verification.lanes:
            out += [f"- quarantined (flaky): `{t}` (lane {lane.name})" for t in lane.quarantined]
    return out


def _cost(ts: TaskState) -> float | None:
    costs = [a.cost_usd for a in ts.every_attempt() if a.cost_usd is not None]
    return sum(costs) if costs else None


def _quote(text: str) -> str:
    """A reason as table text: one line, no pipes or markup a page would act on."""
    flat = " ".join((text or "").split())
    for bad, good in (("|", "\\|"), ("<", "&lt;"), (">", "&gt;"), ("`", "'")):
        flat = flat.replace(bad, good)
    return flat[:300]
