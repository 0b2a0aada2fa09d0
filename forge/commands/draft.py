"""`forge draft GOAL`: a planner agent answers with a plan; forge checks it as
`forge plan --check` does (and that every `files` entry names a path that is there,
or a new one in a folder that is), sends the problems back for another try, and
writes the plan only when it is sound, never over a file. It records no plan: the
person reads it first. Each try is a row of the history (`forge stats`)."""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from forge.base.text import usd as fmt_usd
from forge.errors import ExitCode, ForgeError, Interrupted, PlanError
from forge.frozen import frozen
from forge.git.repo import Repository, short_sha
from forge.plan.dag import Waves
from forge.plan.model import DEFAULT_TIMEOUT, Plan
from forge.run.planner import Planner, Try, forget_state, run_try
from forge.run.state.run_state import Status

if TYPE_CHECKING:
    from forge.run.brief import Brief

DEFAULT_TRIES = 3


@dataclass
class Checked:
    """A planner's answer as the checker sees it."""

    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    plan: Plan | None = None
    waves: Waves | None = None


@dataclass
class Drafted:
    file: Path  # where the plan is (or would have been) written
    shown: str  # FILE as the person names it
    tries: list[Try] = field(default_factory=list)
    checked: Checked = field(default_factory=Checked)
    answer: str | None = None  # the last answer's text
    cost_usd: float | None = None
    unpriced: bool = False  # a try reported tokens but no price is known

    @property
    def sound(self) -> bool:
        return self.checked.plan is not None and not self.checked.problems

    def chain(self) -> list[str]:
        """The critical path: the longest chain of tasks, by estimate."""
        from forge.plan.dag import build_graph, critical_path

        plan = self.checked.plan
        assert plan is not None
        length = critical_path(plan)
        graph = build_graph(plan)
        order = {t.id: n for n, t in enumerate(plan.tasks)}
        best = max(length, key=lambda t: (length[t], -order[t]))
        chain = [best]
        while after := sorted(graph.successors(chain[-1]), key=lambda t: (-length[t], order[t])):
            chain.append(after[0])
        return chain

    def parallelism(self) -> tuple[float, float]:
        """(sum of the estimates, the critical path's length)."""
        plan = self.checked.plan
        assert plan is not None
        total = sum(t.estimate if t.estimate is not None else 1.0 for t in plan.tasks)
        est = {t.id: t.estimate if t.estimate is not None else 1.0 for t in plan.tasks}
        return total, sum(est[t] for t in self.chain())

    def data(self) -> dict[str, object]:
        waves = self.checked.waves
        total, path = self.parallelism() if self.sound else (0.0, 0.0)
        return {
            "file": str(self.file) if self.sound else None,
            "plan": self.answer if self.sound else None,
            "problems": list(self.checked.problems),
            "warnings": list(self.checked.warnings),
            "tries": len(self.tries),
            "cost_usd": self.cost_usd,
            "waves": [list(w) for w in waves.waves] if waves is not None and self.sound else [],
            "critical_path": self.chain() if self.sound else [],
            "parallelism": round(total / path, 3) if self.sound and path else None,
            "log": str(self.tries[-1].answered_in) if self.tries else None,
        }

    def text(self) -> str:
        from forge.plan.tables import wave_table

        assert self.checked.plan is not None and self.checked.waves is not None
        total, path = self.parallelism()
        cost = _usd(self.cost_usd, unpriced=self.unpriced)
        tries = f"{len(self.tries)} tr{'ies' if len(self.tries) != 1 else 'y'}"
        return "\n".join(
            [
                wave_table(self.checked.plan, self.checked.waves),
                f"critical path: {' -> '.join(self.chain())} ({path:g} of {total:g} estimate)",
                f"parallelism: {total / path:.1f} (sum of estimates / critical path)",
                f"draft: {tries} by {self.tries[-1].spec}, cost {cost}",
                f"wrote {self.shown}",
                f"next: forge plan {self.shown}",
            ]
        )


def _usd(usd: float | None, *, unpriced: bool) -> str:
    if usd is None:
        return "unknown (" + ("no price for its model" if unpriced else "not reported") + ")"
    text = fmt_usd(usd)
    return text + (" and tokens without a price" if unpriced else "")


def slug(goal: str) -> str:
    """A plan name from the goal's first words."""
    from forge.plan.model import name_problem

    words = re.findall(r"[a-z0-9]+", goal.lower())
    name = "-".join(words[:5])[:40].strip("-")
    return name if name and name_problem(name) is None else "draft"


def target(repo: Repository, goal: str, out: Path | None, *, force: bool) -> tuple[Path, str]:
    """The file to write (default: plans/<name>.toml in the repository) and how to
    name it to the person; refused when it is there."""
    full = (Path.cwd() / out) if out is not None else repo.root / "plans" / f"{slug(goal)}.toml"
    shown = str(out) if out is not None else os.path.relpath(full)
    from forge.plan.model import name_problem

    if full.is_dir():
        raise ForgeError(f"{shown} is a folder: give a file (-o FILE)")
    why = name_problem(full.stem)
    if why:  # the plan is named by its file: a planner could not mend it
        raise ForgeError(
            f"{shown}: `{full.stem}` cannot name a plan: {why}; choose another -o FILE"
        )
    if full.exists() and not force:
        raise ForgeError(f"{shown} exists: give another file (-o FILE), or --force to replace it")
    return full, shown


def tracked_files(repo: Repository, commit: str) -> list[str]:
    out = repo.git("ls-tree", "-r", "--name-only", "-z", commit)
    return [p for p in out.split("\0") if p]


def files_warnings(plan: Plan, tracked: Sequence[str], shown: str) -> list[str]:
    """A `files` entry that names no tracked path and no new file of a tracked folder."""
    from forge.plan.patterns import is_glob

    paths = set(tracked)
    folders = {"/".join(p.split("/")[:n]) for p in tracked for n in range(1, p.count("/") + 1)}
    out = []
    for task in plan.tasks:
        for entry in task.files:
            plain = entry.rstrip("/")
            if is_glob(entry):
                head = re.split(r"[*?\[{]", entry, maxsplit=1)[0]
                plain = head.rpartition("/")[0]
                if not plain or plain in folders:
                    continue
            elif plain in (".", "") or plain in paths or plain in folders:
                continue
            parent = plain.rpartition("/")[0]
            if not is_glob(entry) and (not parent or parent in folders):
                continue  # a new file in a folder that is there
            out.append(
                f"{shown}: task `{task.id}`: `files` entry {entry!r} names no path of the "
                f"repository and no new file in one of its folders"
            )
    return out


def check_answer(repo: Repository, answer: str, file: Path, shown: str) -> Checked:
    """The answer checked as `forge plan --check FILE` would check it once written."""
    from forge.plan.dag import compute_waves
    from forge.plan.load import parse_plan
    from forge.plan.repo_config import load_repo_config
    from forge.plan.specs import check_specs

    checked = Checked()
    try:
        plan = parse_plan(answer.encode(), source=file, shown=shown)
        config = load_repo_config(repo.root)
        check_specs(plan, plan.agent_tables(config.agents), pool=config.auto)
    except PlanError as exc:
        checked.problems = list(exc.problems)
        return checked
    checked.plan, checked.waves = plan, compute_waves(plan)
    return checked


def _agents(repo: Repository) -> dict[str, str]:
    from forge.agents import spec as agents
    from forge.plan.repo_config import load_repo_config

    defs = load_repo_config(repo.root).agents
    out: dict[str, str] = {}
    for name in [*agents.PRESETS, *(n for n in defs if n not in agents.PRESETS)]:
        if name == "shell":
            continue
        try:
            defn, _spec = agents.resolve(name, defs)
        except ForgeError as exc:
            out[name] = f"unusable: {exc.message}"
            continue
        where = "forge.toml" if name in defs else "built in"
        ladder = f"; models {', '.join(defn.models)}" if defn.models else ""
        missing = agents.check_binary(defn)
        out[name] = f"{where}, {'not installed' if missing else 'installed'}{ladder}"
    return out


@frozen
class Options:
    goal: str
    out: Path | None = None
    agent: str | None = None
    tries: int = DEFAULT_TRIES
    base: str | None = None
    force: bool = False
    sandbox: bool | None = None  # --sandbox / --no-sandbox (None: where it holds)


def draft(
    repo: Repository,
    opts: Options,
    *,
    say: Callable[[str], None],
    stop: threading.Event | None = None,
) -> Drafted:
    """Ask the planner up to `opts.tries` times; write the plan when one is sound."""
    from forge.agents.planners import as_planner
    from forge.agents.spec import AgentSpec, resolve
    from forge.plan.repo_config import load_repo_config
    from forge.plan.specs import DEFAULT_AGENT
    from forge.run.brief import Brief

    if not opts.goal.strip():
        raise ForgeError('give a goal: forge draft "what the plan should achieve"')
    if opts.tries < 1:
        raise ForgeError("--tries must be at least 1")
    file, shown = target(repo, opts.goal, opts.out, force=opts.force)
    config = load_repo_config(repo.root)
    spec = opts.agent or config.draft_agent or DEFAULT_AGENT
    defn = resolve(AgentSpec.parse(spec), config.agents)[0]
    if defn.script:
        raise ForgeError(
            f"`{defn.name}` runs its prompt as a script, it is no planner: give a model's "
            "agent (--agent claude, codex, gemini, aider or one of forge.toml's)"
        )
    read_only = as_planner(defn)[1]
    base_name = opts.base or repo.current_branch() or "HEAD"
    commit = repo.rev_parse(opts.base or "HEAD")
    name = file.stem
    logs = repo.state.root / "drafts" / name
    shutil.rmtree(logs, ignore_errors=True)
    tracked = tracked_files(repo, commit)
    brief = Brief(
        goal=opts.goal,
        base=f"{base_name} @ {short_sha(commit)}",
        tracked=tracked,
        agents=_agents(repo),
        default_agent=DEFAULT_AGENT,
        plan_file="",
        target=shown,
        name=name,
        read_only=read_only,
        base_key=opts.base,
    )
    from forge.base import sandbox

    choice = sandbox.choose(opts.sandbox, None)
    if choice.said is not None:
        say(f"note: {choice.said}")
    planner = Planner(
        repo=repo,
        name=name,
        spec=spec,
        defs=config.agents,
        base=commit,
        logs=logs,
        timeout=DEFAULT_TIMEOUT,
        sandbox=choice.on,
        stop=stop if stop is not None else threading.Event(),
    )
    result = Drafted(file=file, shown=shown)
    try:
        _tries(repo, opts, planner, brief, result, say=say)
    finally:
        forget_state(repo, name)
    if not result.sound:
        return result
    if result.checked.plan is not None:
        from forge.commands.plan import missing_binaries

        # Said as `forge plan --check` says it, not sent back: the machine that runs
        # the plan (or its `env`) may have the program.
        result.checked.warnings += missing_binaries(result.checked.plan, repo.root)
    _write(file, result.answer or "", force=opts.force)
    return result


def _tries(
    repo: Repository,
    opts: Options,
    planner: Planner,
    brief: Brief,
    result: Drafted,
    *,
    say: Callable[[str], None],
) -> None:
    """Ask the planner until an answer is sound or the tries are spent."""
    from forge.run.brief import render

    logs, name, tracked = planner.logs, planner.name, brief.tracked
    for number in range(1, opts.tries + 1):
        plan_file = logs / f"try-{number}" / "plan.toml"
        prompt = render(
            dataclasses.replace(brief, plan_file=str(plan_file)),
            attempt=number,
            tries=opts.tries,
            problems=result.checked.problems + result.checked.warnings,
            last=result.answer,
        )
        one = run_try(planner, number, prompt)
        result.tries.append(one)
        stopped = _judge(repo, result, one, tracked, say=say)
        _record(repo, name, one, result, prompt_chars=len(prompt))
        if stopped is not None:
            raise stopped
        if result.sound:
            break
        if number < opts.tries:
            n = len(result.checked.problems)
            say(f"note: try {number}: {n} problem{'s' * (n != 1)}; asking again")


def _judge(
    repo: Repository,
    result: Drafted,
    one: Try,
    tracked: Sequence[str],
    *,
    say: Callable[[str], None],
) -> ForgeError | None:
    """Check a try's answer into `result`. Returns what ends the draft at once: the
    person's stop, or the planner's infrastructure failing (a pause, as a task's)."""
    if one.changed:
        shown = ", ".join(one.changed[:5]) + (" ..." if len(one.changed) > 5 else "")
        say(f"note: try {one.number}: the planner changed {shown} in its checkout; discarded")
    failure = one.failure
    if failure is not None and failure.status == Status.INTERRUPTED:
        return Interrupted("interrupted: no plan written")
    if failure is not None and failure.status == Status.INFRA:
        return ForgeError(
            f"paused: the planner could not run: {failure.reason}; "
            f"run the same `forge draft` again once it can (log: {one.log})",
            code=ExitCode.PAUSED,
        )
    if one.answer is None:
        why = f" ({failure.reason})" if failure is not None else ""
        how = "" if one.read_only else "write it to $FORGE_PLAN_FILE or "
        result.checked = Checked(
            problems=[f"no plan in the answer{why}: {how}end your reply with it in a ```toml block"]
        )
        return None
    result.answer = one.answer
    result.checked = check_answer(repo, one.answer, result.file, result.shown)
    if result.checked.plan is not None:
        result.checked.warnings = files_warnings(result.checked.plan, tracked, result.shown)
    return None


def _record(repo: Repository, name: str, one: Try, result: Drafted, *, prompt_chars: int) -> None:
    """The try's row in the history, and its cost added to the draft's."""
    from forge.plan.repo_config import load_repo_config
    from forge.run.records import history
    from forge.run.records.spend import attempt_usd

    prices: Mapping[str, tuple[float, float]]
    try:
        prices = load_repo_config(repo.root, read_agents=False).all_prices()
    except ForgeError:
        from forge.agents.prices import DEFAULT_PRICES

        prices = DEFAULT_PRICES
    usd = attempt_usd(one.attempt, prices)
    if usd is not None:
        result.cost_usd = round((result.cost_usd or 0.0) + usd, 6)
    elif one.attempt.input_tokens or one.attempt.output_tokens:
        result.unpriced = True
    if one.answer is None:
        outcome = str(one.failure.status) if one.failure is not None else "UNSOUND"
    else:
        outcome = "SOUND" if result.sound else "UNSOUND"
    history.record_draft(
        repo.state, name, one.attempt, outcome=outcome, usd=usd, prompt_chars=prompt_chars
    )


def _write(file: Path, text: str, *, force: bool) -> None:
    """The plan, whole or not at all; never over a file unless `force`."""
    from forge.base.files import atomic_write_text

    file.parent.mkdir(parents=True, exist_ok=True)
    if force:
        atomic_write_text(file, text)
        return
    tmp = file.with_name(f".{file.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    try:
        os.link(tmp, file)  # fails, replacing nothing, when the file is there
    except FileExistsError:
        raise ForgeError(f"{file} appeared while drafting: not replaced (--force to)") from None
    finally:
        tmp.unlink(missing_ok=True)
