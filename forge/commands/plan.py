"""`forge plan`: check a plan file (recording nothing), or record it; and what it
shows either way: the wave table, a summary line, JSON with the critical path."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from forge.errors import ForgeError
from forge.frozen import frozen
from forge.git.repo import Repository
from forge.plan import dag, registry, tables
from forge.plan.dag import Waves
from forge.plan.model import Plan
from forge.plan.registry import Recorded
from forge.run.state.replan import TakenUp

if TYPE_CHECKING:  # the forecast (and the attempts history it reads) only for agent tasks
    from forge.run.records.forecast import Forecast


@frozen
class Planned:
    plan: Plan
    waves: Waves
    critical_path: Mapping[str, float]
    recorded: Recorded | None = None  # None: checked only
    record_file: Path | None = None
    warnings: tuple[str, ...] = ()  # advice about the plan (forge.plan.advice)
    taken: TakenUp | None = None  # recorded while the plan runs: what the run takes up
    forecast: Forecast | None = None  # from the attempts history (None: no history)
    verification: str = ""  # what verifies its work, and each lane run's time limit

    def data(self) -> dict[str, object]:
        data: dict[str, object] = tables.wave_data(
            self.plan,
            self.waves,
            critical_path=self.critical_path,
            recorded=self.recorded,
            record_file=self.record_file,
        )
        if self.recorded is not None:
            data["running"] = None if self.taken is None else self.taken.to_dict()
        data["forecast"] = None if self.forecast is None else self.forecast.to_dict()
        return data

    def text(self) -> str:
        lines = [
            tables.wave_table(self.plan, self.waves),
            tables.plan_summary(self.plan, self.waves, recorded=self.recorded),
        ]
        if self.verification:
            lines.append(self.verification)
        if self.record_file is not None:
            lines.append(f"record: {self.record_file}")
        if self.taken is not None:
            lines.append(self.taken.describe())
        if self.forecast is not None:
            lines.append(self.forecast.line())
        return "\n".join(lines)


def check(plan_file: Path) -> Planned:
    """Validate a plan file and compute its waves and critical path; needs no
    repository, writes nothing."""
    plan, waves = registry.check(plan_file)
    return Planned(
        plan,
        waves,
        dag.critical_path(plan),
        warnings=_warnings(plan, _root()),
        verification=tables.verify_summary(plan.verify, known=plan.verify is not None),
    )


def record(repo: Repository, plan_file: Path, *, note: Callable[[str], None]) -> Planned:
    """Record a plan file. Said first (through `note`), before anything is written:
    what the change means for work that already merged; an integration branch that
    is not forge's is refused."""
    from forge.plan.repo_config import load_repo_config
    from forge.run.state import reconcile, replan
    from forge.run.state.store import StateStore

    new = registry.load_plan_told(plan_file, load_repo_config(repo.root).agents)[0]
    reconcile.check_integration_is_ours(
        repo, new.name, StateStore(repo.state, new.name).load_existing()
    )
    for line in reconcile.explain(repo, new):
        note(line)
    recorded, taken = replan.record(repo, plan_file)
    from forge.plan.repo_config import load_repo_config

    default = load_repo_config(repo.root, read_agents=False).verify
    return Planned(
        recorded.plan,
        recorded.as_waves(),
        dict(recorded.critical_path),
        recorded=recorded,
        record_file=repo.state.plan_file(recorded.plan.name),
        warnings=_warnings(recorded.plan, repo.root),
        taken=taken,
        forecast=_forecast(repo, recorded.plan),
        verification=tables.verify_summary(recorded.plan.verify_config(default)),
    )


def _forecast(repo: Repository, plan: Plan) -> Forecast | None:
    if all(t.run is not None for t in plan.tasks):
        return None  # shell commands only: there is nothing to forecast
    from forge.run.records.forecast import forecast

    try:
        return forecast(repo, plan)
    except Exception:  # noqa: BLE001 advice only: a forecast never stops a plan
        return None


def _warnings(plan: Plan, root: Path | None) -> tuple[str, ...]:
    from forge.plan import advice

    return (*advice.warnings(plan), *missing_binaries(plan, root))


def _root() -> Path | None:
    from forge.git.repo import discover

    try:
        return discover().root
    except ForgeError:
        return None  # no repository here: only the plan's own agents


def missing_binaries(plan: Plan, root: Path | None) -> list[str]:
    """The agents the plan names whose program is not there (the run would stop
    on them as INFRA): said now, as warnings, since a plan's `env` or the machine
    that runs it may still supply them."""
    from forge.plan.repo_config import load_repo_config
    from forge.plan.specs import DEFAULT_AGENT

    specs = {
        s
        for t in plan.tasks
        if t.run is None
        for s in (t.candidates or [t.agent or plan.agent or DEFAULT_AGENT])
    }
    specs |= {*plan.fallback, *plan.candidates, *(s for s in [plan.review, plan.judge] if s)}
    specs |= {t.review for t in plan.tasks if isinstance(t.review, str)}
    specs.discard("auto")
    if not specs:
        return []
    from forge.agents import spec as agents

    config = load_repo_config(root) if root is not None else None
    defs = plan.agent_tables(dict(config.agents) if config is not None else {})
    said: dict[str, str] = {}
    for spec in sorted(specs):
        try:
            defn, _ = agents.resolve(spec, defs)
        except ForgeError:
            continue  # told as a plan error already
        why = agents.check_binary(defn)
        if why and defn.name not in said:
            said[defn.name] = f"{why}; tasks on it would stop as INFRA"
    return list(said.values())


@frozen
class Shown:
    """What `forge plan` answers with: its JSON, its graph (in `graph_format`), or
    the wave table."""

    as_json: bool = False
    graph: bool = False
    graph_format: str = "mermaid"


def answer(
    plan_file: Path,
    shown: Shown,
    *,
    check_only: bool,
    repo: Callable[[], Repository],
    say: Callable[[str], None],
) -> dict[str, object] | str:
    """`forge plan`: check (and record) the plan; the answer is what `shown` asks
    for. Notes and warnings go to `say`."""
    from forge.plan.graph import FORMATS, render

    as_json, graph, graph_format = shown.as_json, shown.graph, shown.graph_format

    if graph_format not in FORMATS:
        raise ForgeError(f"--format: '{graph_format}' is not one of {', '.join(FORMATS)}")
    if graph and as_json:
        raise ForgeError("give --graph or --json, not both")
    if check_only or graph:  # a view records nothing
        planned = check(plan_file)
    else:
        planned = record(repo(), plan_file, note=lambda line: say(f"note: {line}"))
    for warning in planned.warnings:
        say(f"warning: {warning}")
    if as_json:
        return planned.data()
    if graph:
        return render(planned.plan, planned.waves, graph_format)
    return planned.text() + "\n"
