"""The live view on a real pseudo-terminal, setup as a phase you can see (live and in
`forge status`), and a failed setup's meaningful line."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import struct
import subprocess
import termios
import threading
import time
from pathlib import Path

from helpers.gitkit import forge_cmd, run_forge
from helpers.runkit import plan_and_run, state, wait_for, write_plan

from forge.commands.live import LiveView
from forge.run.state.gate_story import GateStep, StepKind
from forge.run.state.records import Phase
from forge.run.state.run_state import Attempt, Invocation, RunState, Status, TaskState


class Terminal:
    """forge run with stdout and stderr on a pseudo-terminal of rows x cols."""

    def __init__(self, cwd: Path, *args: str, rows: int = 12, cols: int = 120) -> None:
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        self.master = master
        self.chunks: list[bytes] = []
        env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "NO_COLOR")}
        self.proc = subprocess.Popen(
            forge_cmd(*args),
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=slave,
            stderr=slave,
            env={**env, "TERM": "xterm"},
        )
        os.close(slave)
        self.reader = threading.Thread(target=self._drain, daemon=True)
        self.reader.start()

    def _drain(self) -> None:
        while True:
            try:
                chunk = os.read(self.master, 65536)
            except OSError:
                return
            if not chunk:
                return
            self.chunks.append(chunk)

    @property
    def text(self) -> str:
        return b"".join(self.chunks).decode(errors="replace")

    def finish(self) -> int:
        code = self.proc.wait(timeout=120)
        self.reader.join(timeout=10)
        os.close(self.master)
        return code


SETUP_WAITS = """\
max_parallel = 2
setup = "while [ ! -f {flag} ]; do sleep 0.05; done"
{tasks}
"""


def _tasks(n: int) -> str:
    return "\n".join(
        f'[[task]]\nid = "t{i}"\nrun = "echo {i} > f{i}.txt"\nfiles = ["f{i}.txt"]'
        for i in range(n)
    )


def test_live_view_shows_setup_then_prints_the_results_once(repo: Path, tmp_path: Path) -> None:
    flag = tmp_path / "flag"
    plan = write_plan(tmp_path, SETUP_WAITS.format(flag=flag, tasks=_tasks(30)))
    assert run_forge(repo, "plan", str(plan)).returncode == 0
    term = Terminal(repo, "run")
    try:
        # Both slots' tasks in setup, as the summary line says (the first frame may
        # have been drawn while the second task was still starting).
        wait_for(
            lambda: "RUNNING  setup " in term.text and "2 running  28 pending" in term.text,
            what="two tasks shown in setup",
        )
        # and `forge status` from another process says so too
        cp = run_forge(repo, "status")
        row = next(line for line in cp.stdout.splitlines() if line.startswith("t0 "))
        assert "RUNNING" in row and "setup for " in row
        status_json = json.loads(run_forge(repo, "status", "--json").stdout)
        assert status_json["tasks"][0]["phase"] == "setup"
    finally:
        flag.touch()
        code = term.finish()
    assert code == 0, term.text[-3000:]
    out = term.text
    # The live area never holds more than the terminal's rows: 30 tasks, 12 rows.
    header = re.search(r"task +status +attempts", out)
    assert header and len(re.findall(r"task +status +attempts", out)) == 1  # printed once
    results = out[header.start() :]
    assert "RUNNING" not in results and "elapsed" not in results  # the live area is gone
    assert "your branch, index and working tree were not touched" in results
    phases = [p["name"] for p in state(repo)["tasks"]["t0"]["attempts"][0]["phases"]]
    assert phases == ["worktree", "setup", "run", "merge"]


def test_live_lines_fit_the_height_and_cost_no_more_for_a_larger_plan() -> None:
    def view_of(n: int) -> tuple[LiveView, RunState]:
        tasks = {f"t{i}": TaskState(id=f"t{i}") for i in range(n)}
        st = RunState(plan="p", integration="refs/heads/x", tasks=tasks)
        view = LiveView(quiet=True)
        view.tty = True  # drawn, not printed
        for i in range(5):
            ts = tasks[f"t{i}"]
            ts.status = Status.RUNNING
            ts.attempts.append(Attempt(number=1, agent="run"))
            view.on_change(st, ts.id)
        for i in range(3):
            ts = tasks[f"t{i}"]
            ts.status = Status.MERGED
            view.on_change(st, ts.id)
        return view, st

    small, _ = view_of(10)
    large, _ = view_of(1000)
    lines = large.lines(6)
    assert len(lines) == 6
    assert lines[0].startswith("3 merged  2 running  995 pending  ")
    assert [ln.split()[0] for ln in lines[1:]] == ["t3", "t4", "t2", "t1", "t0"]
    assert len(small.lines(6)) == len(lines)


FAILING_SETUP = """\
setup = "printf 'Collecting nosuchpkg\\\\nERROR: No matching distribution found for nosuchpkg\\\\nhint: See above for details.\\\\n'; exit 1"
[[task]]
id = "a"
run = "echo a > a.txt"
files = ["a.txt"]
"""


def test_failed_setup_reason_is_the_meaningful_line(repo: Path, tmp_path: Path) -> None:
    cp = plan_and_run(repo, write_plan(tmp_path, FAILING_SETUP))
    assert cp.returncode == 5
    reason = state(repo)["tasks"]["a"]["reason"]
    assert reason == "setup failed: ERROR: No matching distribution found for nosuchpkg"


GATED = """\
max_parallel = 2
verify = "test -f README.md"
batch_max = 2
{tasks}
"""


def test_the_terminal_shows_the_live_area_then_a_table_that_fits(
    repo: Path, tmp_path: Path
) -> None:
    """On a 60-column terminal: no event line scrolls above the live area (they go to
    the run's log), and the final table has a totals line with every row cut to the
    width with `…`."""
    long = "x" * 150
    tasks = _tasks(3) + (
        f'\n[[task]]\nid = "loud"\nrun = "echo {long}; exit 3"\nfiles = ["loud.txt"]'
    )
    plan = write_plan(tmp_path, GATED.format(tasks=tasks))
    assert run_forge(repo, "plan", str(plan)).returncode == 0
    term = Terminal(repo, "run", rows=30, cols=60)
    code = term.finish()
    assert code == 5, term.text[-3000:]
    out = term.text.replace("\r\n", "\n")
    assert not re.search(r"^\[ *[0-9.]+s\]", out, re.M)  # no timestamped event line
    header = re.search(r"task +status +attempts", out)
    assert header
    lines = out[header.start() :].splitlines()
    table = lines[: next(i for i, ln in enumerate(lines) if ln.startswith("total ")) + 1]
    assert all(len(line) <= 60 for line in table), table
    assert any(line.endswith("…") and line.startswith("loud ") for line in table)
    total = next(line for line in table if line.startswith("total "))
    assert "3/4 merged" in total
    events = (repo / ".git" / "forge" / "plans" / "p" / "logs" / "events.log").read_text()
    assert "loud" in events


def test_the_gate_has_a_line_of_its_own() -> None:
    from forge.commands.live import gate_line
    from forge.commands.status_rows import GateView
    from forge.run.state.gate_record import GatePhase

    bisecting = GateView(["a"], ["t12", "t02"], GatePhase.BISECTING, left=2)
    line = gate_line(bisecting)
    assert line == "gate: verifying t12, t02 (batch of 2) · bisection: at most 2 more · 1 queued"
    assert gate_line(GateView([])) == ""
    # What runs now, with the bisection's step, said once, and for how long.
    doing = "bisection step 2 of at most 3: bisection: running 1 failing test(s) (t) on 1a2b3c"
    line = gate_line(
        GateView([], ["t1"], GatePhase.BISECTING, left=2, doing=doing, since=time.time() - 3)
    )
    assert line.startswith(f"gate: verifying t1 (batch of 1) · {doing} for "), line
    assert "at most 2 more" not in line
    # At 80 columns what runs is cut in its middle; its elapsed time stays.
    narrow = gate_line(
        GateView(["q"], ["t1"], GatePhase.BISECTING, left=2, doing=doing, since=time.time() - 3),
        80,
    )
    assert len(narrow) <= 80 and "…" in narrow, narrow
    assert narrow.endswith(" for 3.0s · 1 queued"), narrow


def test_the_gate_says_its_bisection_step_and_what_its_lane_runs() -> None:
    import threading
    from types import SimpleNamespace
    from typing import cast

    from forge.run.context import RunContext
    from forge.run.gate.doing import Doing
    from forge.run.state import events as ev
    from forge.run.state import reducer
    from forge.run.state.gate_record import GateRecord

    state = RunState("p", "refs/heads/x", {}, gate=GateRecord(batch=["t"], head="h"))
    saved: list[ev.Event] = []

    def record(*events: ev.Event, later: bool = False) -> None:
        del later  # (held in memory here either way)
        for event in events:
            reducer.apply(state, event)
            saved.append(event)

    ctx = SimpleNamespace(store=SimpleNamespace(lock=threading.Lock()), state=state, record=record)

    def gate() -> GateRecord:
        assert state.gate is not None
        return state.gate

    doing = Doing(cast(RunContext, ctx))
    doing.now("running the whole suite on 1a2b3c")
    doing.stage("setup of lane unit")
    assert gate().doing == "running the whole suite on 1a2b3c (setup of lane unit)"
    doing.bisecting(3)
    doing.now("bisection: running 1 failing test(s) (t) on 4d5e6f")
    doing.stage("lane unit run 1")
    assert gate().doing == (
        "bisection step 1 of at most 3: bisection: running 1 failing test(s) (t) on 4d5e6f "
        "(lane unit run 1)"
    )
    doing.bisecting(1)
    doing.now("bisection: running 1 failing test(s) (t) on 7a8b9c")
    assert str(gate().doing).startswith("bisection step 2 of at most 2: ")
    doing.bisecting(0)  # over: the tree that lands runs every test
    doing.now("running the whole suite on 4d5e6f")
    assert gate().doing == "running the whole suite on 4d5e6f" and gate().since is not None
    doing.batch()
    doing.bisecting(2)
    doing.now("x")
    assert gate().doing == "bisection step 1 of at most 2: x"
    assert len(saved) == 7


def test_the_eta_is_a_range_until_it_settles() -> None:
    from forge.commands.live import Eta

    tasks = {f"t{i}": TaskState(id=f"t{i}") for i in range(10)}
    st = RunState(plan="p", integration="refs/heads/x", tasks=tasks)
    eta = Eta({}, parallel=2)
    eta.update(st, 0.0)
    assert eta.text() == ""  # nothing finished: nothing to go by
    done = tasks["t0"]
    done.status = Status.MERGED
    done.attempts.append(Attempt(number=1, agent="run", duration=10.0))
    eta.update(st, 0.0)
    assert eta.text() == "ETA 30s-1m07s"  # 9 tasks of 10 s on 2 slots, widened both ways
    for i in (1, 2):
        tasks[f"t{i}"].status = Status.MERGED
        tasks[f"t{i}"].attempts.append(Attempt(number=1, agent="run", duration=10.0))
    eta.update(st, 0.0)
    assert eta.text() == "ETA ~35s"  # 7 tasks of 10 s on 2 slots


def test_an_agent_held_below_its_cap_has_a_line() -> None:
    view = LiveView(quiet=True)
    view.on_event("concurrency: claude at most 4 at once (rate limited)")
    view.on_event("concurrency: codex at most 1 at once (rate limited)")
    view.on_event("concurrency: codex at most 2 at once")
    assert view.cap_line() == (
        "concurrency: claude at most 4 at once (rate limited) · codex at most 2 at once"
    )
    assert view.cap_line() in view.lines(10)
    view.on_event("concurrency: claude back to 8 at once (max_parallel)")
    view.on_event("concurrency: codex no longer capped")
    assert view.cap_line() == "" and all("concurrency" not in line for line in view.lines(10))


def test_the_live_view_shows_a_tasks_candidates_under_it() -> None:
    cands = {
        "a+1": TaskState(id="a+1", candidate="claude:opus", status=Status.RUNNING),
        "a+2": TaskState(id="a+2", candidate="codex", status=Status.FAILED, reason="no changes"),
    }
    cands["a+1"].attempts.append(Attempt(number=1, agent="claude:opus"))
    cands["a+1"].attempts[0].phases.append(Phase("agent", 0.0, None))
    ts = TaskState(id="a", status=Status.RUNNING, candidates=cands)
    st = RunState(plan="p", integration="refs/heads/x", tasks={"a": ts})
    view = LiveView(quiet=True)
    view.tty = True
    view.on_change(st, "a+1")  # a candidate's change shows on its task's row
    lines = view.lines(10)
    assert lines[1].split() == ["a", "RUNNING", "best", "of", "2"]
    assert lines[2].split()[:2] == ["claude:opus", "agent"]
    assert lines[3].split() == ["codex", "failed:", "no", "changes"]


def test_the_eta_counts_the_gates_verification() -> None:
    """Every task's work is done and the gate verifies: the ETA is what is left of
    a verification as long as the gate's earlier ones, not `~1s`."""
    from forge.commands.live import Eta

    tasks = {f"t{i}": TaskState(id=f"t{i}", status=Status.QUEUED) for i in range(3)}
    for ts in tasks.values():
        ts.attempts.append(Attempt(number=1, agent="run", duration=1.0))
    st = RunState(plan="p", integration="refs/heads/x", tasks=tasks)
    st.gate_steps = [
        GateStep(StepKind.BATCH, "batch", 100.0, 160.0, "PASS"),
        GateStep(StepKind.BATCH, "batch", 200.0, None, "PASS"),
    ]
    eta = Eta({}, parallel=2)
    eta.update(st, 210.0)
    assert eta.text() == "ETA ~50s"
    for ts in tasks.values():
        ts.status = Status.MERGED
    eta.update(st, 210.0)
    assert eta.text() == ""  # nothing left to wait for


def test_a_finished_tasks_reason_is_not_cut_short() -> None:
    """The terminal cuts a line to its width (with `…`); the view does not cut the
    reason at a fixed 60 characters first."""
    reason = "breaks verification: lane unit: " + "tests/test_clock.py::test_skew " * 4
    ts = TaskState(id="a", status=Status.RUNNING)
    st = RunState(plan="p", integration="refs/heads/x", tasks={"a": ts})
    view = LiveView(quiet=True)
    view.tty = True
    view.on_change(st, "a")
    ts.status, ts.reason = Status.FAILED, reason
    view.on_change(st, "a")
    assert any(line.rstrip().endswith(reason.strip()) for line in view.lines(10))


def test_the_totals_line_gives_the_runs_wall_time() -> None:
    from forge.commands.results import results_table

    tasks = {f"t{i}": TaskState(id=f"t{i}", status=Status.MERGED) for i in range(3)}
    for ts in tasks.values():
        ts.attempts.append(Attempt(number=1, agent="run", duration=20.0))
    st = RunState(plan="p", integration="refs/heads/x", tasks=tasks, wall_seconds=25.0)
    total = next(line for line in results_table(st).splitlines() if line.startswith("total "))
    assert "25.0s" in total and "attempts 1m00s together" in total, total


def test_the_eta_names_a_first_verification_and_counts_a_bisections_steps() -> None:
    """Before any verification of the plan has ended, its length is not taken as
    0 s (`ETA ~1s` through a minute of verification); a bisection still to run
    counts each of its steps; a step a killed run left open is not under way."""
    from forge.commands.live import Eta
    from forge.run.state.gate_record import GatePhase, GateRecord

    tasks = {f"t{i}": TaskState(id=f"t{i}", status=Status.QUEUED) for i in range(2)}
    for ts in tasks.values():
        ts.attempts.append(Attempt(number=1, agent="run", duration=1.0))
    st = RunState(plan="p", integration="refs/heads/x", tasks=tasks)
    st.gate = GateRecord(batch=["t0", "t1"], head="h", since=100.0)
    eta = Eta({}, parallel=2)
    eta.update(st, 130.0)
    assert eta.text() == "ETA: when the verification under way ends (the plan's first)"
    tasks["t1"].status = Status.PENDING
    eta.update(st, 130.0)
    assert eta.text().endswith(" + a verification"), eta.text()
    tasks["t1"].status = Status.QUEUED
    st.gate_steps = [GateStep(StepKind.BATCH, "batch", 0.0, 60.0, "FAIL", run=0)]
    st.gate = GateRecord(
        batch=["t0", "t1"], head="h", phase=GatePhase.BISECTING, left=1, since=120.0
    )
    eta.update(st, 130.0)
    assert eta.text() == "ETA ~1m50s"  # 50 s of this step, then one more of 60 s
    st.gate = None
    st.gate_steps.append(GateStep(StepKind.BATCH, "batch", 10.0, None, "?", run=0))
    st.invocations = [Invocation(started="a"), Invocation(started="b")]
    eta.update(st, 130.0)
    assert eta.text() == "ETA ~1m00s"  # not frozen at 0 by the open step of run 1


def test_a_blame_that_waits_for_evidence_is_said_so_not_failed() -> None:
    from forge.run.state import events as ev
    from forge.run.state import reducer

    ts = TaskState(id="b", status=Status.RUNNING)
    st = RunState(plan="p", integration="refs/heads/x", tasks={"b": ts})
    view = LiveView(quiet=True)
    view.tty = True
    view.on_change(st, "b")
    ts.status, ts.reason = Status.FAILED, "breaks verification: lane unit: tests/t.py::test_x"
    reducer.apply(st, ev.BlameDoubted("b"))
    view.on_change(st, "b")
    view._counted = -1e9  # (recount now)
    lines = view.lines(10)
    assert lines[0].startswith("1 blamed, waiting for evidence"), lines
    assert lines[-1].split()[1:5] == ["blamed,", "waiting", "for", "evidence"], lines
    reducer.apply(st, ev.BlamesSettled())
    assert not ts.doubted  # the gate is done: no evidence comes, the blame holds
    reducer.apply(st, ev.BlameDoubted("b"))
    reducer.apply(st, ev.RunFinished(finished="t", wall_seconds=1.0))
    assert not ts.doubted  # and so when the run ends
