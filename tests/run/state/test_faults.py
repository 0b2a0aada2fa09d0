"""Fault injection: forge kills itself (SIGKILL) at a named point, or is killed with
-9 from outside while an agent or the verification runs; the next `forge run`
ends with every task merged exactly once, integration consistent with the state,
no process left behind, and every salvaged attempt's work in its salvage ref."""

from __future__ import annotations

import functools
import os
import shlex
import subprocess
import sys
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest
from helpers.gitkit import FAKES, git, run_forge
from helpers.runkit import (
    alive,
    assert_integration_verified,
    kill9,
    merge_count,
    spawn_forge,
    state,
    statuses,
    wait_for,
    write_plan,
)

from forge.git import worktrees
from forge.git.repo import discover
from forge.run.attempt.reset import reset_for_attempt
from forge.run.state import reducer
from forge.run.state.run_state import RunState, TaskState

TASKS = ("a", "b", "c", "d")
PY = shlex.quote(sys.executable)

# Four tasks, two at a time, two chains: `c` checks that `a`'s work is in its base.
PLAN = """
max_parallel = 2

[[task]]
id = "a"
run = "echo a > a.txt"
files = ["a.txt"]

[[task]]
id = "b"
run = "echo b > b.txt"
files = ["b.txt"]

[[task]]
id = "c"
run = "echo c > c.txt"
files = ["c.txt"]
deps = ["a"]
check = "test -f a.txt"

[[task]]
id = "d"
run = "echo d > d.txt"
files = ["d.txt"]
deps = ["b"]
"""


def _record(repo: Path, tmp_path: Path, body: str = PLAN) -> None:
    cp = run_forge(repo, "plan", str(write_plan(tmp_path, body)))
    assert cp.returncode == 0, cp.stderr


def _run_killed(repo: Path, fault: str) -> subprocess.CompletedProcess[str]:
    p = spawn_forge(repo, "run", env={"FORGE_FAULT": fault, "FORGE_GRACE": "0.5"})
    out, err = p.communicate(timeout=60)
    assert p.returncode == -9, f"forge was not killed at {fault}: exit {p.returncode}\n{out}{err}"
    return subprocess.CompletedProcess(p.args, p.returncode, out, err)


def leftovers(fragment: str = "p/") -> list[int]:
    """Live processes forge tagged for this test's runs. The tag alone is not enough:
    other tests on the machine run plans named `p` too, so the process must also
    carry this test's own FORGE_WORKTREES."""
    mine = f"FORGE_WORKTREES={os.environ['FORGE_WORKTREES']}".encode()
    tag = f"FORGE_PROC_TAG={fragment}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            env = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if mine in env and any(v.startswith(tag) for v in env) and alive(int(entry.name)):
            found.append(int(entry.name))
    return found


def salvage_refs(repo: Path, task: str | None = None) -> dict[str, str]:
    where = "refs/forge/salvage/p/" + (f"{task}/" if task else "")
    out = git(repo, "for-each-ref", "--format=%(refname) %(objectname)", where)
    return dict(line.split(" ", 1) for line in out.splitlines() if line)


def assert_resumed_cleanly(repo: Path, killed: list[str]) -> str:
    """The resume run: everything merged once, integration matches the state."""
    cp = run_forge(repo, "run", timeout=60)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert statuses(repo) == dict.fromkeys(TASKS, "MERGED")
    for tid in TASKS:
        assert merge_count(repo, tid) == 1, f"{tid} merged {merge_count(repo, tid)} times"
    st = state(repo)
    head = git(repo, "rev-parse", "forge/p-integration")
    for tid in TASKS:
        merged = st["tasks"][tid]["merged_commit"]
        assert git(repo, "merge-base", "--is-ancestor", merged, head) == ""
        assert git(repo, "show", f"{head}:{tid}.txt") == tid
    # the dependency order held: c's base already had a's merge
    assert (
        git(
            repo,
            "merge-base",
            "--is-ancestor",
            st["tasks"]["a"]["merged_commit"],
            st["tasks"]["c"]["base"],
        )
        == ""
    )
    assert not leftovers(), "a process of the run outlived it"
    for tid in killed:
        assert st["tasks"][tid]["attempts"][0]["status"] in ("INTERRUPTED", "MERGED")
    # every salvage ref holds the work of the attempt it saved, and is named
    for ref, _oid in salvage_refs(repo).items():
        tid = ref.split("/")[4]
        assert git(repo, "show", f"{ref}:{tid}.txt") == tid
        assert ref in st["tasks"][tid]["salvage"]
        assert ref in cp.stdout
    assert not list(Path(os.environ["FORGE_WORKTREES"]).rglob(".forge-salvage-index*"))
    return cp.stdout


def settle(repo: Path) -> None:
    """Wait for git commands the killed runner had started to finish (git carries on
    when its parent dies): a worktree being added looks dirty until it is done."""
    gitdir = repo / ".git"

    def busy() -> list[Path]:
        return [
            *gitdir.glob("worktrees/*/locked"),
            *gitdir.glob("worktrees/*/index.lock"),
            *gitdir.glob("index.lock"),
        ]

    wait_for(lambda: not busy(), what="the killed runner's git commands to finish")


def left_work(repo: Path, tid: str) -> bool:
    """Did the killed attempt of `tid` leave work: uncommitted changes in its worktree,
    or commits on its branch past the pinned base?"""
    st = state(repo)
    ts = st["tasks"][tid]
    slot = st["slots"].get(ts["slot"] or "")
    # Seen through forge's own git dir for the slot: the slot's `.git` is the task's,
    # and a kill while forge renews it can leave an index that shows phantom changes.
    path = Path(slot["path"]) if slot else None
    if (
        path is not None
        and worktrees.is_worktree(path)
        and worktrees.dirty_paths(path, discover(repo))
    ):
        return True
    branch = git(repo, "for-each-ref", "--format=%(objectname)", f"refs/heads/forge/p/{tid}")
    return bool(branch) and ts["base"] is not None and branch != ts["base"]


# point -> does the killed attempt's work end up in a salvage ref?
POINTS = {
    "after-agent": True,  # uncommitted in the worktree
    "after-commit": True,  # committed on the task branch, never merged
    "before-merge": True,
    "merge-before-update-ref": True,  # merge commit written, integration not moved
    "merge-after-update-ref": False,  # integration moved, state not written: it merged
}


@pytest.mark.parametrize("point", list(POINTS))
def test_a_kill_at_each_point_loses_nothing(point: str, repo: Path, tmp_path: Path) -> None:
    _record(repo, tmp_path)
    _run_killed(repo, f"{point}@2")  # the second time: a task after the first
    before = statuses(repo)
    killed = [t for t, s in before.items() if s == "RUNNING"]
    assert killed, before
    merged_before = {t for t, s in before.items() if s == "MERGED"}
    head_before = git(repo, "rev-parse", "forge/p-integration")
    settle(repo)
    with_work = [t for t in killed if left_work(repo, t)]
    assert_resumed_cleanly(repo, killed)
    # nothing merged before the kill was lost or redone
    for tid in merged_before:
        assert merge_count(repo, tid) == 1
    assert git(repo, "merge-base", "--is-ancestor", head_before, "forge/p-integration") == ""
    if POINTS[point]:
        assert with_work, "the task killed at the fault point had work"
        final = state(repo)["tasks"]
        for tid in with_work:
            if final[tid]["attempts"][0]["status"] == "MERGED":
                # The other running task may have landed just before the kill: its
                # work is on integration, recorded as merged, nothing to salvage.
                assert merge_count(repo, tid) == 1
                continue
            assert salvage_refs(repo, tid), f"{tid}'s killed attempt was not salvaged"
    else:
        landed = [t for t in killed if state(repo)["tasks"][t]["attempts"][0]["status"] == "MERGED"]
        assert landed, "a merge that reached integration is recorded as MERGED, not redone"
        assert len(state(repo)["tasks"][landed[0]]["attempts"]) == 1


@pytest.mark.usefixtures("unboxed")  # it writes down `$$`
def test_kill9_while_an_agent_runs(repo: Path, tmp_path: Path) -> None:
    mark, pids = tmp_path / "b-started", tmp_path / "b-pids"
    body = PLAN.replace(
        'run = "echo b > b.txt"',
        # The first attempt leaves partial work and hangs (ignoring TERM, with a
        # grandchild); the next one finishes.
        f"run = '''if [ -f {mark} ]; then echo b > b.txt; exit 0; fi; echo b > b.txt; "
        f'trap "" TERM; (trap "" TERM; sleep 600) & echo $! >> {pids}; echo $$ >> {pids}; '
        f"touch {mark}; sleep 600'''",
    )
    _record(repo, tmp_path, body)
    p = spawn_forge(repo, "run", env={"FORGE_GRACE": "0.5"})
    wait_for(mark.exists, what="b's agent started")
    kill9(p)
    assert p.returncode == -9
    assert statuses(repo)["b"] == "RUNNING"
    assert leftovers("p/b/"), "the agent outlives its killed runner..."
    out = assert_resumed_cleanly(repo, ["b"])
    for pid in map(int, pids.read_text().split()):
        assert not alive(pid), "...until the next run stops it"
    assert salvage_refs(repo, "b"), "b's killed attempt left work: it is salvaged"
    assert "b:" in out


@pytest.mark.usefixtures("unboxed")  # it writes down `$$`
def test_kill9_during_a_batchs_verification(repo: Path, tmp_path: Path) -> None:
    started, pid_file = tmp_path / "verify-started", tmp_path / "verify-pid"
    verify = (
        f"if [ -f {started} ]; then exit 0; fi; echo $$ > {pid_file}; touch {started}; sleep 600"
    )
    _record(repo, tmp_path, f"verify = '''{verify}'''\n" + PLAN)
    base = git(repo, "rev-parse", "main")
    p = spawn_forge(repo, "run", env={"FORGE_GRACE": "0.5"})
    wait_for(started.exists, what="the verification started")
    kill9(p)
    queued = [t for t, s in statuses(repo).items() if s == "QUEUED"]
    assert queued, "the batch under verification is QUEUED"
    assert "MERGED" not in statuses(repo).values(), "nothing landed before its verification"
    assert git(repo, "rev-parse", "forge/p-integration") == base
    verifier = int(pid_file.read_text())
    assert_resumed_cleanly(repo, [])
    assert state(repo)["verification"]["verdict"] == "PASS"
    assert not alive(verifier), "the killed run's verification outlived the next run"
    assert_integration_verified(repo)


# Kill points of the gate; `x` breaks the verification, so each run bisects.
GATE_POINTS = ["gate-candidate-built", "gate-bisect", "gate-before-land", "gate-after-land"]


@pytest.mark.parametrize("point", GATE_POINTS)
def test_a_kill_in_the_gate_lands_each_task_once(point: str, repo: Path, tmp_path: Path) -> None:
    verify = f"{PY} {FAKES / 'verify_count.py'} {tmp_path / 'n'} --fail-if x.txt"
    x = '[[task]]\nid = "x"\nrun = "echo x > x.txt"\nfiles = ["x.txt"]\n'
    _record(repo, tmp_path, f"verify = '''{verify}'''\nverify_reruns = 0\n" + PLAN + x)
    _run_killed(repo, point)
    settle(repo)
    cp = run_forge(repo, "run", timeout=60)
    assert cp.returncode == 5, cp.stdout + cp.stderr
    assert statuses(repo) == {**dict.fromkeys(TASKS, "MERGED"), "x": "FAILED"}
    for tid in TASKS:
        assert merge_count(repo, tid) == 1, f"{tid} merged {merge_count(repo, tid)} times"
        assert git(repo, "show", f"forge/p-integration:{tid}.txt") == tid
    assert state(repo)["tasks"]["x"]["reason"].startswith("breaks verification: lane verify")
    assert state(repo)["gate"] is None
    assert not leftovers(), "a process of the run outlived it"
    assert_integration_verified(repo)


def test_kill9_during_clean_then_clean_again(repo: Path, tmp_path: Path) -> None:
    body = '[[task]]\nid = "a"\nrun = "echo work > a.txt; exit 1"\nfiles = ["a.txt"]\n'
    _record(repo, tmp_path, body)
    assert run_forge(repo, "run").returncode == 5
    slot = Path(next(iter(state(repo)["slots"].values()))["path"])
    (slot / "a.txt").write_text("edited by hand\n")
    p = spawn_forge(repo, "clean", env={"FORGE_FAULT": "clean-after-salvage"})
    p.communicate(timeout=60)
    assert p.returncode == -9
    first = salvage_refs(repo, "a")
    assert first, "the salvage was written before the kill"
    assert {git(repo, "show", f"{r}:a.txt") for r in first} == {"edited by hand"}
    cp = run_forge(repo, "clean")
    assert cp.returncode == 0, cp.stdout + cp.stderr
    after = salvage_refs(repo, "a")
    assert first.items() <= after.items(), "a salvage ref was lost"
    contents = {git(repo, "show", f"{r}:a.txt") for r in after}
    assert contents == {"edited by hand", "work"}, "the hand edit and the failed attempt are kept"
    assert not slot.exists()
    assert git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1
    assert not git(repo, "for-each-ref", "refs/heads/forge/p/")
    assert not list(Path(os.environ["FORGE_WORKTREES"]).rglob(".forge-salvage-index*"))
    named = [r for r in after if r in cp.stdout]
    assert named, "the second clean names the salvage ref of the unmerged branch"


def test_salvages_at_once_keep_each_tasks_own_work(repo: Path) -> None:
    """Attempts start on worker threads, so two can salvage their slots at once;
    each salvage ref must hold its own task's work and nothing else."""
    r = discover(repo)
    base = git(repo, "rev-parse", "HEAD")
    plan = SimpleNamespace(name="p")
    root = Path(os.environ["FORGE_WORKTREES"]) / "repo" / "p"
    tasks = [f"t{i}" for i in range(4)]
    paths = {t: root / f"slot-{t}" for t in tasks}
    for t in tasks:
        git(repo, "branch", f"forge/p/{t}", base)
        worktrees.add(r, paths[t], base)
    for _round in range(3):
        states = {t: TaskState(id=t, base=base, branch=f"refs/heads/forge/p/{t}") for t in tasks}
        st = RunState(plan="p", integration="refs/heads/forge/p-integration", tasks=states)
        for t in tasks:
            (paths[t] / f"{t}.txt").write_text(f"work of {t}\n")
        barrier = threading.Barrier(len(tasks))

        def salvage(
            ts: TaskState, path: Path, barrier: threading.Barrier, st: RunState = st
        ) -> None:
            barrier.wait()
            reset_for_attempt(
                r,
                plan,  # type: ignore[arg-type]
                ts,
                path,
                record=functools.partial(reducer.apply, st),
            )

        threads = [
            threading.Thread(target=salvage, args=(states[t], paths[t], barrier)) for t in tasks
        ]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        for t in tasks:
            (ref,) = states[t].salvage
            names = git(repo, "ls-tree", "--name-only", ref).split()
            assert f"{t}.txt" in names, f"{t}'s work is missing from {ref}"
            assert not [n for n in names if n.endswith(".txt") and n != f"{t}.txt"], names
            assert git(repo, "show", f"{ref}:{t}.txt") == f"work of {t}"
            assert not git(paths[t], "status", "--porcelain"), "the slot is clean for the attempt"
    assert not list(root.glob(".forge-salvage-index*"))
