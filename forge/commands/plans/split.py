"""`forge split PLAN --tasks a,b --into NEW`: move tasks that have not merged into a
plan of their own.

The new plan file is written next to the old one (NEW.toml) with the old plan's
settings; the tasks are cut out of the old file by its text (forge/plan/edit.py), so
its comments stay. Both are recorded. A moved task may depend on a task left behind
only when that one has merged: the dependency is then dropped, and the new plan
starts from the old plan's integration head, which holds that work.
"""

from __future__ import annotations

import contextlib
from dataclasses import replace
from pathlib import Path

from forge.base.files import atomic_write_text, plan_lock
from forge.errors import ForgeError
from forge.frozen import frozen
from forge.git.refs import integration_ref
from forge.git.repo import Repository
from forge.plan import edit, registry
from forge.plan.dag import compute_waves
from forge.plan.load import parse_plan
from forge.plan.model import Plan
from forge.plan.registry import Recorded
from forge.plan.tables import wave_table
from forge.run.state.run_state import Status
from forge.run.state.store import StateStore


@frozen
class Cut:
    old_text: str
    new_text: str
    old_plan: Plan
    new_plan: Plan
    new_path: Path
    dropped_deps: dict[str, list[str]]  # moved task -> merged deps left behind


def _statuses(repo: Repository, name: str) -> dict[str, str]:
    state = StateStore(repo.state, name).load_existing()
    return {tid: str(ts.status) for tid, ts in (state.tasks.items() if state else ())}


def _check_moves(plan: Plan, moved: list[str], statuses: dict[str, str]) -> dict[str, list[str]]:
    """Refuse a move that would break a dependency; the merged deps each moved task
    leaves behind (dropped from it in the new plan)."""
    ids = plan.task_ids
    for tid in moved:
        if tid not in ids:
            raise ForgeError(f"plan '{plan.name}' has no task '{tid}' (tasks: {', '.join(ids)})")
        if statuses.get(tid) == Status.MERGED:
            raise ForgeError(f"task '{tid}' has merged into plan '{plan.name}': it cannot move")
    if len(set(moved)) != len(moved):
        raise ForgeError(f"a task is named twice in --tasks: {', '.join(moved)}")
    if not [t for t in ids if t not in moved]:
        raise ForgeError(f"that would leave plan '{plan.name}' with no tasks; move fewer")
    dropped: dict[str, list[str]] = {}
    for task in plan.tasks:
        for dep in task.deps:
            if task.id in moved and dep not in moved:
                if statuses.get(dep) != Status.MERGED:
                    raise ForgeError(
                        f"task '{task.id}' depends on '{dep}', which stays in plan "
                        f"'{plan.name}' and has not merged; move '{dep}' too"
                    )
                dropped.setdefault(task.id, []).append(dep)
            elif task.id not in moved and dep in moved:
                raise ForgeError(
                    f"task '{task.id}' stays in plan '{plan.name}' but depends on '{dep}'; "
                    f"move '{task.id}' too, or leave '{dep}'"
                )
    return dropped


def cut(repo: Repository, old: Recorded, moved: list[str], new: str) -> Cut:
    """Work out both files and check them; writes nothing."""
    src = old.source_path
    if src is None or not src.is_file():
        raise ForgeError(f"plan '{old.name}' has no plan file to split (it was {src})")
    registry.check_name(repo, new)
    if new in repo.state.recorded_plans() or new == old.name:
        raise ForgeError(f"plan '{new}' is already recorded; name a new plan")
    new_path = src.parent / f"{new}.toml"
    if new_path.exists():
        raise ForgeError(f"{new_path} already exists; name a new plan")
    dropped = _check_moves(old.plan, moved, _statuses(repo, old.name))
    if dropped:
        base = repo.ref_value(integration_ref(old.name))
        assert base is not None  # a task of it merged
        note = f"split from plan '{old.name}': its integration head, which holds " + ", ".join(
            sorted({d for deps in dropped.values() for d in deps})
        )
    else:
        base, note = old.base_commit, f"split from plan '{old.name}': its base"
    deps = {
        t.id: [d for d in t.deps if d not in dropped.get(t.id, [])]
        for t in old.plan.tasks
        if t.id in moved
    }
    text = src.read_text(encoding="utf-8")
    old_text, new_text = edit.split_text(
        text, moved, new_name=new, new_base=base, base_note=note, new_deps=deps
    )
    old_plan = parse_plan(old_text.encode(), source=src, shown=str(src))
    new_plan = parse_plan(new_text.encode(), source=new_path, shown=str(new_path))
    return Cut(old_text, new_text, old_plan, new_plan, new_path, dropped)


def split(
    repo: Repository, plan_ref: str | None, tasks: list[str], new: str, *, dry_run: bool
) -> list[str]:
    """Split, or say what a split would do (`dry_run`); the lines to show."""
    old = registry.resolve(repo, plan_ref)
    moved = [t.strip() for t in tasks if t.strip()]
    if not moved:
        raise ForgeError("name the tasks to move: --tasks a,b")
    # The run lock: a plan that runs is not split under it (Busy, exit 2). A dry run
    # writes nothing, not even the lock's owner file.
    lock = (
        contextlib.nullcontext()
        if dry_run
        else plan_lock(repo.state, old.name, command="forge split")
    )
    with lock:
        c = cut(repo, old, moved, new)
        lines = []
        for plan in (c.old_plan, c.new_plan):
            lines += [f"plan {plan.name}:", wave_table(plan, compute_waves(plan)), ""]
        lines += [
            f"{tid}: no longer depends on {', '.join(deps)} (merged in plan '{old.name}')"
            for tid, deps in c.dropped_deps.items()
        ]
        if dry_run:
            return [*lines, f"dry run: nothing was written (would write {c.new_path})"]
        atomic_write_text(c.new_path, c.new_text)
        assert old.source_path is not None
        atomic_write_text(old.source_path, c.old_text)
        # The old plan keeps the base its integration branch grew from.
        again = replace(
            registry.prepare(repo, old.source_path),
            base_ref=old.base_ref,
            base_commit=old.base_commit,
        )
        registry.store(repo, again, locked=True)
        registry.record(repo, c.new_path)
        lines += _forget_moved(repo, again.plan, moved)
    return [
        *lines,
        f"moved {', '.join(moved)} from plan '{old.name}' into plan '{new}' ({c.new_path}); "
        f"both are recorded: `forge run {new}`",
    ]


def _forget_moved(repo: Repository, plan: Plan, moved: list[str]) -> list[str]:
    """The moved tasks leave the old plan's run state; work they left uncommitted in a
    worktree is kept in a salvage ref, as when a task leaves a plan between runs."""
    from forge.run.state.recovery import drop_task

    store = StateStore(repo.state, plan.name)
    state = store.load_existing()
    if state is None:
        return []
    notes: list[str] = []
    for tid in moved:
        if tid in state.tasks:
            notes += drop_task(repo, plan, store, state, tid)
    store.save(state)
    return notes
