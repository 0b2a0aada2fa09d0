"""Following the run state as it is written (`store.Tail`, what `forge serve` reads
by): after every event, across the journal's folding into new snapshots, with a
line half-written, the state read by following equals the state read whole; a line
of a newer forge is a StateError, as for the whole read."""

from __future__ import annotations

from pathlib import Path

import pytest

from forge.base.files import StateDir
from forge.base.liveness import Owner
from forge.errors import StateError
from forge.run.state import events as ev
from forge.run.state.run_state import Attempt, RunState, Status, TaskState
from forge.run.state.store import JOURNAL_PREFIX, StateStore, Tail


def _store(tmp_path: Path, n: int) -> tuple[StateStore, RunState]:
    store = StateStore(StateDir(tmp_path), "p")
    tasks = {f"t{i}": TaskState(id=f"t{i}") for i in range(n)}
    st = RunState(plan="p", integration="refs/heads/forge/p-integration", tasks=tasks)
    store.save(st)
    return store, st


def _whole(store: StateStore) -> dict[str, object]:
    back = store.load_existing()
    assert back is not None
    return back.to_dict()


def test_following_equals_reading_whole_across_folds(tmp_path: Path) -> None:
    store, st = _store(tmp_path, 4)
    tail = Tail(store.path)
    me = Owner.me("test")
    snapshots = set()
    for n in range(300):  # past 256 lines: the journal is folded into a new snapshot
        tid = f"t{n % 4}"
        store.record(st, ev.AttemptStarted(tid, Attempt(number=n + 1, agent="shell"), me))
        store.record(st, ev.AttemptEnded(tid, Status.FAILED, f"try {n}"))
        if n % 7 == 0:
            followed = tail.read()
            assert followed is not None and followed.to_dict() == _whole(store)
        snapshots.add(store.path.stat().st_ino)
    followed = tail.read()
    assert followed is not None and followed.to_dict() == _whole(store)
    assert len(snapshots) > 1  # it did follow a fold


def test_a_half_written_line_waits_for_its_end(tmp_path: Path) -> None:
    store, st = _store(tmp_path, 2)
    store.record(st, ev.AttemptStarted("t0", Attempt(number=1, agent="shell"), Owner.me("t")))
    tail = Tail(store.path)
    assert tail.read() is not None
    (journal,) = store.path.parent.glob(f"{JOURNAL_PREFIX}*.jsonl")
    line = b'{"kind":"AttemptEnded","task":"t0","status":"FAILED","reason":"no"}\n'
    with journal.open("ab") as fh:
        fh.write(line[:20])
    followed = tail.read()
    assert followed is not None and followed.tasks["t0"].status == Status.RUNNING
    with journal.open("ab") as fh:
        fh.write(line[20:])
    followed = tail.read()
    assert followed is not None and followed.tasks["t0"].status == Status.FAILED


def test_a_newer_forges_line_is_a_state_error_and_no_state_is_none(tmp_path: Path) -> None:
    assert Tail(tmp_path / "plans" / "p" / "state.json").read() is None
    store, st = _store(tmp_path, 1)
    store.record(st, ev.AttemptStarted("t0", Attempt(number=1, agent="shell"), Owner.me("t")))
    (journal,) = store.path.parent.glob(f"{JOURNAL_PREFIX}*.jsonl")
    with journal.open("a") as fh:
        fh.write('{"kind":"SomethingNew","task":"t0"}\n')
    with pytest.raises(StateError, match="unexpected shape"):
        Tail(store.path).read()
