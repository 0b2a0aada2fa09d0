"""`forge clean`: remove a plan's worktrees and branches, salvaging first.

Work that never merged is committed to a salvage ref (and named) before its
worktree or branch goes. The integration branch is kept while it holds work no
other branch has (not accepted yet); state is reset only when it goes too.
"""

from __future__ import annotations

import contextlib
import shutil
from pathlib import Path

from forge.base import faults
from forge.base.files import plan_lock
from forge.git import refs, worktrees
from forge.git.contained import VIEW_SUFFIX
from forge.git.merge import is_ancestor
from forge.git.repo import Repository
from forge.run.state import events as ev
from forge.run.state.folders import is_plan_key, verification_keys
from forge.run.state.recovery import stop_leftovers, sweep_salvage_indexes
from forge.run.state.run_state import RunState, Status
from forge.run.state.store import StateStore
from forge.verify.pool import release, remove, used_by


def empty_pool(repo: Repository) -> list[str]:
    """`forge clean --pool`: the shared verification checkouts of every plan, of
    `forge verify` and of the hooks (forge/verify/pool.py), and the verification
    layers (forge/layers/store.py), those no verification is using."""
    from forge.layers import store
    from forge.verify.pool import empty

    return empty(repo) + store.empty(repo)


def clean_plan(
    repo: Repository, plan: str, *, dry_run: bool = False, with_all: bool = False
) -> list[str]:
    """Remove the plan's worktrees and branches; what was done. `with_all`: every plan
    is being cleaned (`--all`), and the shared checkouts are said by `clean_shared`."""
    if dry_run:
        return would_clean(repo, plan, with_all=with_all)
    notes: list[str] = []
    with plan_lock(repo.state, plan, command="forge clean"):
        store = StateStore(repo.state, plan)
        state = store.load_existing()
        integration_ref = refs.integration_ref(plan)
        integration = repo.ref_value(integration_ref)
        emptied: dict[Path, int] = {}  # folders that held what was removed: levels to prune
        if state is not None:
            notes += _stop_leftovers(repo, store, state)
            notes += _remove_slots(repo, plan, state, store, emptied)
        notes += _remove_verification_checkouts(repo, plan, emptied)
        notes += release(repo, plan)  # its members of the pool no other plan uses
        # A branch checked out in a worktree (the user's own, or one they added) is
        # theirs to move first: deleting it would leave that worktree on nothing.
        checked_out = worktrees.checked_out(repo)
        notes += _drop_task_branches(repo, plan, integration, state, store, checked_out)
        if integration is not None:
            notes += _drop_integration(repo, plan, integration, state, store, checked_out)
        notes += _remove_cluster_cache(repo, plan)
        notes += _remove_agent_state(repo, plan)
        notes += _remove_leftovers(
            repo, plan, state_reset=state is not None and not store.path.exists()
        )
        worktrees.prune(repo)
        root = repo.worktrees_root()
        emptied.setdefault(root / plan, 2)
        books = repo.state.verify_dir / "checkouts"
        kept = [p.name for p in books.iterdir()] if books.is_dir() else []
        for key in {
            plan,
            *verification_keys(repo, plan),
            *(k for k in kept if is_plan_key(plan, k)),
        }:
            emptied.setdefault(root / ".verify" / key, 3)
            # Its checkouts are gone: so is what their setup made and their run markers.
            shutil.rmtree(books / key, ignore_errors=True)
        _remove_empty(books, up=1)
        _remove_empty(repo.state.verify_dir / "pool", up=1)  # the pool's books
        emptied.setdefault(root / ".verify", 2)
        for folder, up in emptied.items():
            _remove_empty(folder, up=up)
    return notes


def _remove_leftovers(repo: Repository, plan: str, *, state_reset: bool) -> list[str]:
    """What else forge made for the plan: the local cluster's bare remote, and the
    logs once the state they belong to is gone."""
    notes = []
    folders = [repo.state.root / "cluster" / f"{plan}.git"]
    if state_reset:
        folders.append(repo.state.logs_dir(plan))
    for folder in folders:
        if folder.is_dir():
            shutil.rmtree(folder, ignore_errors=True)
            notes.append(f"removed {folder}")
    return notes


def _remove_agent_state(repo: Repository, plan: str) -> list[str]:
    """The agents' per-task homes (under $XDG_STATE_HOME/forge): sessions, history."""
    from forge.run.state.folders import agent_state_dir

    folder = agent_state_dir(repo, plan)
    if not folder.exists():
        return []
    shutil.rmtree(folder.parent, ignore_errors=True)
    _remove_empty(folder.parent.parent, up=1)
    return [f"removed the agents' state {folder}"]


def _remove_cluster_cache(repo: Repository, plan: str) -> list[str]:
    cache = repo.worktrees_root() / plan / ".cluster"  # local:N workers' mirror and slots
    if not cache.exists():
        return []
    shutil.rmtree(cache, ignore_errors=True)
    return [f"removed the local cluster workers' cache {cache}"]


def _stop_leftovers(repo: Repository, store: StateStore, state: RunState) -> list[str]:
    notes = []
    for ts in state.tasks.values():
        if ts.status == Status.RUNNING:  # a run killed with its agent still going
            stopped = stop_leftovers(store, state, ts, grace=repo.settings.grace)
            if stopped:
                notes.append(f"stopped {stopped} leftover process(es) of {ts.id}")
    return notes


def _remove_slots(
    repo: Repository, plan: str, state: RunState, store: StateStore, emptied: dict[Path, int]
) -> list[str]:
    """Each slot's uncommitted work goes to a salvage ref, then the worktree goes."""
    notes = []
    for folder in {Path(slot.path).parent for slot in state.slots.values()}:
        sweep_salvage_indexes(folder)
    for slot in list(state.slots.values()):
        path = Path(slot.path)
        ref = worktrees.salvage(repo, path, plan=plan, task=slot.task or slot.name)
        if ref:
            notes.append(f"salvaged uncommitted work in {path} to {ref}")
            if slot.task and slot.task in state.tasks:
                store.record(state, ev.Salvaged(slot.task, (ref,)), later=True)
            store.save(state)
        faults.point("clean-after-salvage")
        worktrees.remove(repo, path)
        said: list[ev.Event] = [ev.SlotRemoved(slot.name)]
        said += [
            ev.SlotFreed(None, None, ts.id) for ts in state.tasks.values() if ts.slot == slot.name
        ]
        for event in said:
            store.record(state, event, later=True)
        store.save(state)
        notes.append(f"removed worktree {path}")
        emptied[path.parent] = 2  # the plan's folder, the repository's folder
    return notes


def _drop_task_branches(
    repo: Repository,
    plan: str,
    integration: str | None,
    state: RunState | None,
    store: StateStore,
    checked_out: dict[str, Path],
) -> list[str]:
    """Task branches go; one whose work never reached integration is kept in a ref."""
    notes = []
    for ref, head in _task_branches(repo, plan):
        if ref in checked_out:
            notes.append(_skipped(ref, checked_out[ref]))
            continue
        if integration is None or not is_ancestor(repo, head, integration):
            task = refs.task_of(plan, ref)
            kept = worktrees.keep(repo, head, plan=plan, task=task)
            notes.append(f"branch {refs.branch_name(ref)} held unmerged work: kept in {kept}")
            if state is not None and task in state.tasks and kept not in state.tasks[task].salvage:
                store.record(state, ev.Salvaged(task, (kept,)), later=True)
                store.save(state)
        repo.try_git("update-ref", "-d", ref, head)
        notes.append(f"deleted branch {refs.branch_name(ref)}")
    return notes


def _remove_verification_checkouts(
    repo: Repository, plan: str, emptied: dict[Path, int]
) -> list[str]:
    """The plan's verification checkouts (one per lane): under the worktree root, and
    linked worktrees an older forge made wherever the root was (git knows them)."""
    notes = []
    keys = verification_keys(repo, plan)
    lanes = [p for key in keys for p in sorted((repo.worktrees_root() / ".verify" / key).iterdir())]
    lanes = [p for p in lanes if not p.name.endswith(VIEW_SUFFIX)]  # forge's git dirs
    for path in [*lanes, *worktrees.registered(repo)]:
        mine = is_plan_key(plan, path.parent.name) and path.parent.parent.name == ".verify"
        if mine and path.is_dir():
            worktrees.remove(repo, path)
            notes.append(f"removed verification worktree {path}")
            emptied[path.parent] = 3  # <key>, .verify, the repository's folder
    return notes


def _drop_integration(
    repo: Repository,
    plan: str,
    integration: str,
    state: RunState | None,
    store: StateStore,
    checked_out: dict[str, Path],
) -> list[str]:
    """The integration branch goes only once its work is in the user's branches."""
    integration_ref = refs.integration_ref(plan)
    branch = refs.branch_name(integration_ref)
    if integration_ref in checked_out:
        return [_skipped(integration_ref, checked_out[integration_ref])]
    if not _accepted(repo, integration) and not _squashed(repo, plan, integration):
        return [
            f"kept branch {branch}: it holds work not accepted yet "
            f"(`forge accept {plan}`, or `git branch -D {branch}`)"
        ]
    repo.try_git("update-ref", "-d", integration_ref, integration)
    if state is not None:
        store.path.unlink(missing_ok=True)
    return [f"deleted branch {branch} (already in your branches)"]


def _task_branches(repo: Repository, plan: str) -> list[tuple[str, str]]:
    out = repo.git("for-each-ref", "--format=%(refname) %(objectname)", refs.task_refs(plan))
    return [tuple(line.split(" ", 1)) for line in out.splitlines() if line]  # type: ignore[misc]


def _accepted(repo: Repository, commit: str) -> bool:
    out = repo.git("for-each-ref", "--format=%(refname)", "--contains", commit, refs.BRANCHES)
    return any(not refs.is_forge_branch(ref) for ref in out.splitlines())


def _squashed(repo: Repository, plan: str, integration: str) -> bool:
    """`forge accept --squash` brought it in (its squashed commits are in a branch),
    or the code host merged the pull request `forge pr` opened for it."""
    from forge.host.record import merged_upstream
    from forge.run.state.accepted import squashed_heads

    if merged_upstream(repo.state, plan, integration):
        return True
    tip = squashed_heads(repo.state, plan).get(integration)
    return tip is not None and _accepted(repo, tip)


def _skipped(ref: str, where: Path) -> str:
    short = ref.removeprefix("refs/heads/")
    return (
        f"kept branch {short}: it is checked out in {where} "
        f"(switch that worktree to another branch, then clean again)"
    )


def _remove_empty(folder: Path, *, up: int) -> None:
    """Remove `folder` and then its parents while they are empty, at most `up`
    levels, and the default `.forge-worktrees` when nothing is left in it (a root
    given with FORGE_WORKTREES or --worktree-root is the user's and stays)."""
    for _ in range(up):
        try:
            folder.rmdir()  # only an empty folder goes
        except OSError:
            return
        folder = folder.parent
    if folder.name == ".forge-worktrees":
        with contextlib.suppress(OSError):
            folder.rmdir()


def would_clean(repo: Repository, plan: str, *, with_all: bool = False) -> list[str]:
    """What `clean_plan` would remove (and keep), said; nothing is changed. With
    `with_all` the shared checkouts are left to `clean_shared`, which removes them
    all (a plan would have said "would keep" of one another plan still used)."""
    from forge.run.state.folders import plan_folders

    state = StateStore(repo.state, plan).load_existing()
    integration = repo.ref_value(refs.integration_ref(plan))
    checked_out = worktrees.checked_out(repo)
    notes = []
    for slot in state.slots.values() if state is not None else []:
        path = Path(slot.path)
        if path.is_dir() and worktrees.dirty_paths(path, repo, look_only=True):
            notes.append(f"would salvage uncommitted work in {path} to a ref")
    for ref, head in _task_branches(repo, plan):
        name = refs.branch_name(ref)
        if ref in checked_out:
            notes.append(_skipped(ref, checked_out[ref]).replace("kept", "would keep", 1))
        elif integration is None or not is_ancestor(repo, head, integration):
            notes.append(f"would keep branch {name}'s unmerged work in a ref, then delete it")
        else:
            notes.append(f"would delete branch {name}")
    reset = state is None
    if integration is not None:
        branch = refs.branch_name(refs.integration_ref(plan))
        if _accepted(repo, integration) or _squashed(repo, plan, integration):
            notes.append(f"would delete branch {branch} (already in your branches)")
            reset = True
        else:
            notes.append(f"would keep branch {branch}: it holds work not accepted yet")
    pooled = set(used_by(repo, plan))
    for folder in plan_folders(repo, plan):
        if folder.path in pooled:
            continue  # said below: kept while another plan or the hooks use it
        if folder.kind != "logs" or (reset and state is not None):
            notes.append(f"would remove {folder.kind}: {folder.path}")
    if not with_all:
        notes += release(repo, plan, dry_run=True)
    return notes or ["nothing to remove"]


def clean_shared(repo: Repository, plans: list[str], *, dry_run: bool = False) -> list[str]:
    """`forge clean --all`: the verification checkouts no plan owns (the hooks',
    `forge verify`'s, any shared pool's), each removed under its key's lock."""
    from forge.errors import Busy
    from forge.verify.checkout import key_lock

    root = repo.worktrees_root() / ".verify"
    keys = sorted(p.name for p in root.iterdir() if p.is_dir()) if root.is_dir() else []
    notes = []
    for key in [k for k in keys if not any(is_plan_key(plan, k) for plan in plans)]:
        folder = root / key
        if dry_run:
            notes.append(f"would remove verification checkouts {folder}")
            continue
        try:
            with key_lock(repo, key):  # (a pool member's lock too)
                remove(repo, key)
        except Busy as busy:
            notes.append(f"kept verification checkouts {folder}: {busy.message}")
            continue
        notes.append(f"removed verification checkouts {folder}")
    if not dry_run:
        _remove_empty(root, up=2)
    return notes
