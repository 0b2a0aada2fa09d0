"""The run state on disk: a snapshot plus a journal of one line per task change.
Read back whole, a half-written last line ignored, old single-file state read, the
journal folded into a new snapshot once it is as long as the plan."""

from __future__ import annotations

import json
from pathlib import Path

from forge.base.files import StateDir
from forge.run.state.run_state import JOURNAL_PREFIX, RunState, StateStore, Status, TaskState


def _state(n: int) -> RunState:
    tasks = {f"t{i}": TaskState(id=f"t{i}") for i in range(n)}
    return RunState(plan="p", integration="refs/heads/forge/p-integration", tasks=tasks)


def _journals(store: StateStore) -> list[Path]:
    return sorted(store.path.parent.glob(f"{JOURNAL_PREFIX}*.jsonl"))


def test_task_changes_are_journal_lines_read_back_whole(tmp_path: Path) -> None:
    store = StateStore(StateDir(tmp_path), "p")
    st = _state(3)
    store.save(st)
    snapshot = store.path.read_bytes()
    st.tasks["t1"].status, st.tasks["t1"].reason = Status.FAILED, "boom"
    st.paused = "hold: test"
    store.save(st, task="t1")
    assert store.path.read_bytes() == snapshot  # the snapshot is not rewritten
    [journal] = _journals(store)
    assert len(journal.read_text().splitlines()) == 1
    back = StateStore(StateDir(tmp_path), "p").load_existing()
    assert back is not None
    assert (back.tasks["t1"].status, back.tasks["t1"].reason) == (Status.FAILED, "boom")
    assert back.paused == "hold: test" and back.tasks["t0"].status == Status.PENDING


def test_a_half_written_line_is_ignored(tmp_path: Path) -> None:
    store = StateStore(StateDir(tmp_path), "p")
    st = _state(2)
    store.save(st)
    st.tasks["t0"].status = Status.RUNNING
    store.save(st, task="t0")
    [journal] = _journals(store)
    with journal.open("a") as fh:  # what a writer killed mid-line leaves
        fh.write('{"task":"t1","data":{"id":"t1","status":"MER')
    back = StateStore(StateDir(tmp_path), "p").load_existing()
    assert back is not None
    assert back.tasks["t0"].status == Status.RUNNING and back.tasks["t1"].status == Status.PENDING


def test_old_single_file_state_is_read(tmp_path: Path) -> None:
    store = StateStore(StateDir(tmp_path), "p")
    data = _state(2).to_dict()
    data["tasks"]["t1"]["status"] = "MERGED"
    store.path.parent.mkdir(parents=True)
    store.path.write_text(json.dumps(data))  # no journal id: what forge wrote before
    back = store.load_existing()
    assert back is not None and back.tasks["t1"].status == Status.MERGED


def test_the_journal_is_folded_into_a_snapshot(tmp_path: Path) -> None:
    store = StateStore(StateDir(tmp_path), "p")
    st = _state(100)
    store.save(st)
    for i in range(100):
        st.tasks[f"t{i}"].status = Status.MERGED
        store.save(st, task=f"t{i}")
    # 100 lines fill the journal; the 101st change writes a new snapshot instead
    st.tasks["t0"].reason = "again"
    store.save(st, task="t0")
    assert [p.stat().st_size for p in _journals(store)] in ([], [0])
    raw = json.loads(store.path.read_text())
    assert raw["tasks"]["t0"]["reason"] == "again" and raw["tasks"]["t99"]["status"] == "MERGED"
