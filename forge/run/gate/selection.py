"""`select = "best"`: which of a task's passing candidates lands.

Every candidate that passed its check, scope and review is merged onto the
integration head and verified there, up to `verify_parallel` at once, each in
checkouts of its own (`<plan>.best<i>`); the verdict cache answers a tree judged
before, and the gate's own verification of the winner (the same tree). Among those
that PASS (or are FLAKY) the one with the fewest changed lines lands, then the
lowest cost; with `judge = SPEC`, an agent chooses among them instead: it reads a
prompt file holding the task's prompt and each one's diff, and writes
`{"winner": "<candidate>", "why": "..."}` to the file named by `FORGE_JUDGE_FILE`.
Runs on a thread of its own (forge/run/candidates.py waits for it).
"""

from __future__ import annotations

import json
import queue
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from forge.base.files import atomic_write_text
from forge.git import trailers
from forge.plan.candidates import Candidate, judge_of
from forge.plan.model import Task
from forge.plan.repo_config import VerifyConfig
from forge.run.gate import fanout
from forge.run.state.run_state import TaskState
from forge.verify.records import Verdict

if TYPE_CHECKING:
    from forge.run.context import RunContext

DIFF_LIMIT = 60_000  # characters of each candidate's diff in the judge's prompt


@dataclass
class Selection:
    chosen: Candidate | None = None
    why: str = ""
    failed: dict[str, str] = field(default_factory=dict)  # unit -> why it cannot land
    cost_usd: float | None = None  # the judge's
    input_tokens: int | None = None
    output_tokens: int | None = None


def changed_lines(ctx: RunContext, cts: TaskState) -> int:
    """Lines added and removed by the candidate's work against its base."""
    last = cts.last
    if last is None or last.commit is None or cts.base is None:
        return 1 << 30
    total = 0
    out = ctx.repo.git("diff", "--numstat", "--no-renames", cts.base, last.commit)
    for line in out.splitlines():
        added, removed, _ = line.split("\t", 2)
        # a binary file counts one line each way: it is a change all the same
        total += (int(added) if added.isdigit() else 1) + (int(removed) if removed.isdigit() else 1)
    return total


def cost(cts: TaskState) -> float:
    return sum(a.cost_usd or 0.0 for a in cts.attempts)


def choose(
    ctx: RunContext,
    task: Task,
    passed: Sequence[Candidate],
    recs: Mapping[str, TaskState],
    *,
    config: VerifyConfig | None,
    on_event: Callable[[str], None],
) -> Selection:
    """The candidate to land among `passed`, with why; those that cannot land."""
    out = Selection()
    standing = list(passed)
    if config is not None and config.lanes:
        standing, failed = _verified(ctx, task, standing, recs, config, on_event)
        out.failed.update(failed)
    if not standing:
        return out
    ranked = sorted(standing, key=lambda c: (changed_lines(ctx, recs[c.unit]), cost(recs[c.unit])))
    out.chosen = ranked[0]
    out.why = "the fewest changed lines" if len(ranked) > 1 else "the only one left"
    judge = judge_of(ctx.plan, task)
    if judge is not None and len(ranked) > 1 and not ctx.stop.is_set():
        _judge(ctx, task, judge, ranked, recs, out)
    if out.chosen is not None:
        on_event(f"{task.id}: chose candidate {out.chosen.label} ({out.why})")
    return out


def _verified(
    ctx: RunContext,
    task: Task,
    passed: list[Candidate],
    recs: Mapping[str, TaskState],
    config: VerifyConfig,
    on_event: Callable[[str], None],
) -> tuple[list[Candidate], dict[str, str]]:
    """The candidates whose work, merged onto the integration head, passes, and
    why each other one cannot land (by unit)."""
    from forge.git.merge import conflict_reason, merge_onto
    from forge.run.gate.subsets import Where, head_has_them, regressions
    from forge.verify import engine as verify

    head = ctx.repo.ref_value(ctx.state.integration)
    assert head is not None
    width = max(1, min(ctx.plan.verify_parallel, len(passed)))
    keys: queue.Queue[str] = queue.Queue()
    for i in range(width):
        keys.put(f"{ctx.plan.name}.best{i + 1}")

    def judge(c: Candidate) -> tuple[Candidate, str | None]:
        last = recs[c.unit].last
        assert last is not None and last.commit is not None
        message = trailers.task_message(
            task.title, plan=ctx.plan.name, task=task.id, attempt=last.number, candidate=c.label
        )
        res = merge_onto(ctx.repo, head, last.commit, message=message)
        if not res.merged or res.commit is None:
            return c, conflict_reason(res.conflicts)
        key = keys.get()
        try:
            record = verify.verify_commit(
                ctx.repo,
                res.commit,
                config,
                key=key,
                stop=ctx.stop,
                ask=verify.Ask(
                    on_event=lambda msg: on_event(f"{task.id} [{c.label}]: {msg}"),
                    sandbox=ctx.sandbox,
                ),
            )
            if record.verdict == Verdict.FAIL and regressions(ctx.plan.gate_on, config):
                # failures the integration head has too blame no candidate
                said = lambda msg: on_event(f"{task.id} [{c.label}]: {msg}")  # noqa: E731
                where = Where(key, ctx.stop, said, sandbox=ctx.sandbox)
                if head_has_them(ctx.repo, head, config, record, where):
                    return c, None
        finally:
            keys.put(key)
        if record.verdict in (Verdict.PASS, Verdict.FLAKY):
            return c, None
        from forge.run.gate.story import blame_reason

        return c, blame_reason(record)[0]

    results = fanout.each(judge, passed, width=width, name="best")
    standing, failed = [], {}
    for c, why in results:
        if why is None:
            standing.append(c)
        else:
            failed[c.unit] = why
    return standing, failed


def _judge(
    ctx: RunContext,
    task: Task,
    spec_text: str,
    ranked: list[Candidate],
    recs: Mapping[str, TaskState],
    out: Selection,
) -> None:
    """Ask the judge agent; its answer wins when it names one of `ranked`."""
    from forge.run.attempt.agent import Ask, Folder, ask_agent
    from forge.run.state.run_state import Attempt

    folder = ctx.logs / task.id / "judge"
    folder.mkdir(parents=True, exist_ok=True)
    prompt_file, answer, log = folder / "prompt.md", folder / "winner.json", folder / "judge.log"
    answer.unlink(missing_ok=True)
    atomic_write_text(prompt_file, _prompt(ctx, task, ranked, recs, answer))
    defn, spec = ctx.agents.resolve(spec_text)
    timeout = ctx.plan.timeout_of(task, defn.timeout)
    env = {"FORGE_JUDGE_FILE": str(answer)}
    ask = Ask((defn, spec), task.id, 1, prompt_file, log, timeout, env)
    judge = Attempt(number=1, agent=spec_text, tag=f"{ctx.plan.name}/{task.id}/judge")
    usage = ask_agent(ask, Folder(ctx, folder, judge)).usage
    if usage is not None:  # the judge's spend is the task's
        out.cost_usd, out.input_tokens = usage.cost_usd, usage.input_tokens
        out.output_tokens = usage.output_tokens
    winner, why = _read_answer(answer)
    picked = next((c for c in ranked if winner in (c.label, c.unit)), None)
    if picked is None:
        out.why += f"; the judge named no candidate ({winner or 'no answer'})"
        return
    out.chosen = picked
    out.why = f"judge {spec_text}: {why}" if why else f"judge {spec_text}"


def _read_answer(path: Path) -> tuple[str, str]:
    try:
        data = json.loads(path.read_text(errors="replace"))
    except (OSError, ValueError, RecursionError):  # a judge's file: anything at all
        return "", ""
    if not isinstance(data, dict):
        return "", ""
    return str(data.get("winner", "")).strip(), " ".join(str(data.get("why", "")).split())[:200]


def _prompt(
    ctx: RunContext,
    task: Task,
    ranked: list[Candidate],
    recs: Mapping[str, TaskState],
    answer: Path,
) -> str:
    parts = [
        f"# Choose the best change for task {task.id}: {task.title}\n",
        "## The task\n",
        (task.prompt or "") + "\n",
        f"Each candidate below passed the task's check and the verification. Write "
        f'{{"winner": "<candidate>", "why": "..."}} to {answer} (the file named by '
        f"FORGE_JUDGE_FILE).\n",
    ]
    for c in ranked:
        cts = recs[c.unit]
        last = cts.last
        assert last is not None and last.commit is not None and cts.base is not None
        diff = ctx.repo.git("diff", "--no-color", "--no-ext-diff", cts.base, last.commit)
        if len(diff) > DIFF_LIMIT:
            diff = diff[:DIFF_LIMIT] + "\n... (diff cut)\n"
        parts.append(f"## Candidate {c.label}\n\n```diff\n{diff}```\n")
    return "\n".join(parts)
