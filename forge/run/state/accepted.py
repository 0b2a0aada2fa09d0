"""What `forge accept --now` did while the plan ran: the user's branch moved by forge
itself. The running `forge run` reads it when it ends, so the move is not reported
as a change to the user's repository someone else made."""

from __future__ import annotations

from forge.base.files import SCHEMA_VERSION, StateDir, read_json_or, write_json
from forge.git.repo import Repository
from forge.git.snapshot import Snapshot

ACCEPTED_FILE = "accepted.json"


def record(state: StateDir, plan: str, *, ref: str, old: str, new: str) -> None:
    path = state.plan_dir(plan) / ACCEPTED_FILE
    moves = read_json_or(path, {}, what="accept record").get("moves", [])
    moves.append({"ref": ref, "old": old, "new": new})
    write_json(path, {"schema_version": SCHEMA_VERSION, "moves": moves})


def forget(state: StateDir, plan: str) -> None:
    """A run starts: what was accepted during an earlier run is in its snapshot."""
    (state.plan_dir(plan) / ACCEPTED_FILE).unlink(missing_ok=True)


def replay(repo: Repository, plan: str, before: Snapshot) -> Snapshot:
    """`before` with every move `forge accept --now` made during the run applied."""
    path = repo.state.plan_dir(plan) / ACCEPTED_FILE
    for move in read_json_or(path, {}, what="accept record").get("moves", []):
        before = before.with_move(repo, move["ref"], move["old"], move["new"])
    return before


SQUASHED_FILE = "squashed.json"


def record_squash(
    state: StateDir, plan: str, head: str, *, commits: list[str], branch: str
) -> None:
    """What `forge accept --squash` brought in: the integration head it squashed and
    the commits it made of it (a squash is never the head itself, so no ancestry
    says it was accepted)."""
    path = state.plan_dir(plan) / SQUASHED_FILE
    done = read_json_or(path, {}, what="squash record").get("accepted", [])
    done.append({"head": head, "commits": commits, "branch": branch})
    write_json(path, {"schema_version": SCHEMA_VERSION, "accepted": done})


def squashed_heads(state: StateDir, plan: str) -> dict[str, str]:
    """Each integration head squashed into the user's branches -> its last commit."""
    path = state.plan_dir(plan) / SQUASHED_FILE
    done = read_json_or(path, {}, what="squash record").get("accepted", [])
    return {d["head"]: d["commits"][-1] for d in done if d.get("commits")}


def squashed_in(repo: Repository, plan: str, head: str, into: str) -> bool:
    """`head` was squashed and what was made of it is in `into`."""
    tip = squashed_heads(repo.state, plan).get(head)
    return tip is not None and (
        tip == into or repo.try_git("merge-base", "--is-ancestor", tip, into).returncode == 0
    )
