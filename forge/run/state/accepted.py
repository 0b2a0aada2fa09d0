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
