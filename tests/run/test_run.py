"""`forge run` end to end on real repositories, with shell tasks as fake agents."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from helpers.gitkit import git, run_forge
from helpers.plans import plan as plan_body
from helpers.plans import shell, task
from helpers.runkit import (
    alive,
    kill9,
    merge_count,
    plan_and_run,
    spawn_forge,
    state,
    statuses,
    tagged,
    user_view,
    wait_for,
    write_plan,
)

TWO = plan_body(
    shell("a"), shell("b", deps=["a"], check="test -f a.txt && test -f b.txt"), max_parallel=2
)


def test_success_merges_and_leaves_the_user_untouched(repo: Path, tmp_path: Path) -> None:
    (repo / "dirty.txt").write_text("my own work\n")  # uncommitted user work stays as it is
    before = user_view(repo)
    cp = plan_and_run(repo, write_plan(tmp_path, TWO))
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert statuses(repo) == {"a": "MERGED", "b": "MERGED"}
    assert user_view(repo) == before
    assert "not touched" in cp.stdout
    tree = git(repo, "ls-tree", "--name-only", "forge/p-integration")
    assert {"a.txt", "b.txt", "README.md"} <= set(tree.splitlines())
    # merges are real two-parent commits on integration
    parents = git(repo, "log", "-1", "--format=%P", "forge/p-integration").split()
    assert len(parents) == 2
    # the dependency's base was pinned after `a` merged
    st = state(repo)
    assert (
        git(
            repo,
            "merge-base",
            "--is-ancestor",
            st["tasks"]["a"]["merged_commit"],
            st["tasks"]["b"]["base"],
        )
        == ""
    )


def test_failure_is_failed_and_blocks_dependants(repo: Path, tmp_path: Path) -> None:
    plan = write_plan(
        tmp_path,
        """
[[task]]
id = "a"
run = "echo boom >&2; exit 3"
files = ["a.txt"]

[[task]]
id = "b"
run = "echo b > b.txt"
files = ["b.txt"]
deps = ["a"]
""",
    )
    cp = plan_and_run(repo, plan)
    assert cp.returncode == 5, cp.stdout + cp.stderr
    st = state(repo)
    assert st["tasks"]["a"]["status"] == "FAILED"
    assert "exited 3" in st["tasks"]["a"]["reason"] and "boom" in st["tasks"]["a"]["reason"]
    assert st["tasks"]["b"]["status"] == "BLOCKED"
    assert "a" in st["tasks"]["b"]["reason"]
    # the failed task keeps its worktree for inspection
    slot = st["slots"][st["tasks"]["a"]["slot"]]
    assert Path(slot["path"]).is_dir()


def test_no_change_is_a_failure(repo: Path, tmp_path: Path) -> None:
    plan = write_plan(tmp_path, task("a", run="true", files=["a.txt"]))
    cp = plan_and_run(repo, plan)
    assert cp.returncode == 5
    assert state(repo)["tasks"]["a"]["reason"] == "no changes"


def test_scope_violation_fails_naming_the_files(repo: Path, tmp_path: Path) -> None:
    body = '[[task]]\nid = "a"\nrun = "echo x > a.txt; echo y > other.txt"\nfiles = ["a.txt"]\n'
    cp = plan_and_run(repo, write_plan(tmp_path, body))
    assert cp.returncode == 5
    reason = state(repo)["tasks"]["a"]["reason"]
    assert "outside its declared files" in reason and "other.txt" in reason
    assert "a.txt" not in reason.split(":", 1)[1]


def test_scope_warn_merges_with_a_warning(repo: Path, tmp_path: Path) -> None:
    body = 'scope = "warn"\n[[task]]\nid = "a"\nrun = "echo x > a.txt; echo y > other.txt"\nfiles = ["a.txt"]\n'
    cp = plan_and_run(repo, write_plan(tmp_path, body))
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert "other.txt" in state(repo)["tasks"]["a"]["warnings"][0]


@pytest.mark.usefixtures("unboxed")  # it writes down `$$`
def test_timeout_stops_the_whole_group(repo: Path, tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    body = f"""
timeout = "1s"
[[task]]
id = "slow"
run = '''trap "" TERM; (trap "" TERM; sleep 600) & echo $! >> {pids}; echo $$ >> {pids}; sleep 600'''
files = ["x.txt"]
"""
    cp = plan_and_run(repo, write_plan(tmp_path, body))
    assert cp.returncode == 5, cp.stdout + cp.stderr
    st = state(repo)["tasks"]["slow"]
    assert st["status"] == "TIMEOUT"
    for pid in map(int, pids.read_text().split()):
        assert not alive(pid), f"process {pid} survived the timeout"


def test_conflict_leaves_integration_untouched(repo: Path, tmp_path: Path) -> None:
    go = tmp_path / "go"
    body = f"""
scope = "warn"
max_parallel = 2
[[task]]
id = "one"
run = "echo one > shared.txt; echo 1 > one.txt"
files = ["one.txt"]

[[task]]
id = "two"
run = "while [ ! -f {go} ]; do sleep 0.02; done; echo two > shared.txt; echo 2 > two.txt"
files = ["two.txt"]
"""
    plan = write_plan(tmp_path, body)
    assert run_forge(repo, "plan", str(plan)).returncode == 0
    p = spawn_forge(repo, "run")
    wait_for(
        lambda: (
            (repo / ".git/forge/plans/p/state.json").exists()
            and state(repo)["tasks"]["one"]["status"] == "MERGED"
        ),
        what="one merged",
    )
    head = git(repo, "rev-parse", "forge/p-integration")
    go.write_text("go")
    out, err = p.communicate(timeout=60)
    assert p.returncode == 5, out + err
    st = state(repo)["tasks"]["two"]
    assert st["status"] == "CONFLICT" and "shared.txt" in st["reason"]
    assert git(repo, "rev-parse", "forge/p-integration") == head


def test_second_runner_is_refused_naming_the_holder(repo: Path, tmp_path: Path) -> None:
    go, started = tmp_path / "go", tmp_path / "started"
    body = f"""
[[task]]
id = "a"
run = "touch {started}; while [ ! -f {go} ]; do sleep 0.02; done; echo a > a.txt"
files = ["a.txt"]
"""
    plan = write_plan(tmp_path, body)
    assert run_forge(repo, "plan", str(plan)).returncode == 0
    first = spawn_forge(repo, "run")
    wait_for(started.exists, what="task start")
    second = run_forge(repo, "run")
    assert second.returncode == 2
    assert f"pid {first.pid}" in second.stderr and "busy" in second.stderr
    assert "Traceback" not in second.stderr
    go.write_text("go")
    out, err = first.communicate(timeout=60)
    assert first.returncode == 0, out + err


@pytest.mark.usefixtures("unboxed")  # it writes down `$$`
def test_sigint_stops_everything_and_the_next_run_resumes(repo: Path, tmp_path: Path) -> None:
    go, pids = tmp_path / "go", tmp_path / "pids"
    body = f"""
max_parallel = 2
[[task]]
id = "quick"
run = "echo q > q.txt"
files = ["q.txt"]

[[task]]
id = "hang"
run = '''if [ -f {go} ]; then echo h > h.txt; exit 0; fi; trap "" TERM; (trap "" TERM; sleep 600) & echo $! >> {pids}; echo $$ >> {pids}; sleep 600'''
files = ["h.txt"]
"""
    plan = write_plan(tmp_path, body)
    assert run_forge(repo, "plan", str(plan)).returncode == 0
    p = spawn_forge(repo, "run", env={"FORGE_GRACE": "0.5"})
    wait_for(lambda: pids.exists() and len(pids.read_text().split()) == 2, what="hang started")
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 130, out + err
    for pid in map(int, pids.read_text().split()):
        assert not alive(pid)
    assert not tagged("p/hang/")
    st = statuses(repo)
    assert st["hang"] == "INTERRUPTED"
    go.write_text("go")
    cp = run_forge(repo, "run")
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert statuses(repo) == {"quick": "MERGED", "hang": "MERGED"}
    assert merge_count(repo, "quick") == 1 and merge_count(repo, "hang") == 1


@pytest.mark.slow
def test_kill9_mid_task_then_resume_merges_each_task_once(repo: Path, tmp_path: Path) -> None:
    go, started = tmp_path / "go", tmp_path / "started"
    body = f"""
max_parallel = 2
[[task]]
id = "a"
run = "echo a > a.txt"
files = ["a.txt"]

[[task]]
id = "b"
run = "if [ -f {go} ]; then echo b > b.txt; exit 0; fi; echo partial > b.txt; touch {started}; sleep 600"
files = ["b.txt"]
"""
    plan = write_plan(tmp_path, body)
    assert run_forge(repo, "plan", str(plan)).returncode == 0
    p = spawn_forge(repo, "run")
    wait_for(
        lambda: started.exists() and statuses(repo).get("a") == "MERGED", what="a merged, b running"
    )
    kill9(p)
    assert statuses(repo)["b"] == "RUNNING"
    assert tagged("p/b/")  # the agent outlived its runner...
    go.write_text("go")
    cp = run_forge(repo, "run")
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert not tagged("p/b/")  # ...until the next run stopped it
    assert statuses(repo) == {"a": "MERGED", "b": "MERGED"}
    assert merge_count(repo, "a") == 1 and merge_count(repo, "b") == 1
    st = state(repo)["tasks"]["b"]
    assert st["attempts"][0]["status"] == "INTERRUPTED"
    assert st["salvage"], "the killed attempt's partial work was salvaged"
    salvaged = git(repo, "show", f"{st['salvage'][0]}:b.txt")
    assert salvaged == "partial"


def test_changed_plan_file_is_refused(repo: Path, tmp_path: Path) -> None:
    plan = write_plan(tmp_path, TWO)
    assert run_forge(repo, "plan", str(plan)).returncode == 0
    plan.write_text(plan.read_text() + "\n# edited\n")
    cp = run_forge(repo, "run")
    assert cp.returncode == 2
    assert "changed since it was recorded" in cp.stderr
    assert not (repo / ".git/forge/plans/p/state.json").exists()


def test_accept_fast_forwards_after_a_verified_run(repo: Path, tmp_path: Path) -> None:
    plan = write_plan(tmp_path, 'verify = "test -f a.txt"\n' + TWO)
    cp = plan_and_run(repo, plan)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    cp = run_forge(repo, "accept")
    assert cp.returncode == 0, cp.stderr
    assert git(repo, "rev-parse", "HEAD") == git(repo, "rev-parse", "forge/p-integration")
    assert (repo / "b.txt").read_text() == "b\n"


def test_accept_refuses_to_overwrite_local_changes(repo: Path, tmp_path: Path) -> None:
    plan = write_plan(tmp_path, 'verify = "true"\n' + TWO)
    assert plan_and_run(repo, plan).returncode == 0
    (repo / "a.txt").write_text("mine\n")  # untracked file the merge would overwrite
    cp = run_forge(repo, "accept")
    assert cp.returncode == 2
    assert "refused" in cp.stderr
    assert (repo / "a.txt").read_text() == "mine\n"


@pytest.mark.slow
def test_clean_salvages_unmerged_work(repo: Path, tmp_path: Path) -> None:
    body = '[[task]]\nid = "a"\nrun = "echo work > a.txt; exit 1"\nfiles = ["a.txt"]\n'
    assert plan_and_run(repo, write_plan(tmp_path, body)).returncode == 5
    slot = Path(next(iter(state(repo)["slots"].values()))["path"])
    (slot / "a.txt").write_text("edited by hand\n")  # uncommitted work in the worktree
    cp = run_forge(repo, "clean")
    assert cp.returncode == 0, cp.stderr
    assert not slot.exists()
    refs = git(repo, "for-each-ref", "--format=%(refname)", "refs/forge/salvage/").split()
    assert refs and "salvage" in cp.stdout
    contents = {git(repo, "show", f"{r}:a.txt") for r in refs}
    assert "edited by hand" in contents


def test_work_the_agent_committed_itself_is_kept(repo: Path, tmp_path: Path) -> None:
    body = """
[[task]]
id = "a"
run = "echo one > a.txt; git add a.txt; git commit -qm 'by the agent'; echo two > b.txt"
files = ["a.txt", "b.txt"]

[[task]]
id = "c"
run = "echo c > c.txt; git add c.txt; git commit -qm 'only a commit'"
files = ["c.txt"]
"""
    cp = plan_and_run(repo, write_plan(tmp_path, body))
    assert cp.returncode == 0, cp.stdout + cp.stderr
    tree = set(git(repo, "ls-tree", "--name-only", "forge/p-integration").split())
    assert {"a.txt", "b.txt", "c.txt"} <= tree
    subjects = git(repo, "log", "--format=%s", "forge/p/a")
    assert "by the agent" in subjects  # the agent's own commit stays in the history


def test_a_deleted_integration_branch_runs_its_tasks_again(repo: Path, tmp_path: Path) -> None:
    assert plan_and_run(repo, write_plan(tmp_path, TWO)).returncode == 0
    git(repo, "branch", "-D", "forge/p-integration")
    cp = run_forge(repo, "run")
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert statuses(repo) == {"a": "MERGED", "b": "MERGED"}
    tree = git(repo, "ls-tree", "--name-only", "forge/p-integration").split()
    assert {"a.txt", "b.txt"} <= set(tree)


def test_one_plan_name_from_two_files_is_refused(repo: Path, tmp_path: Path) -> None:
    first = write_plan(tmp_path, TWO)
    (tmp_path / "other").mkdir()
    second = write_plan(tmp_path / "other", TWO)
    assert run_forge(repo, "plan", str(first)).returncode == 0
    before = (repo / ".git/forge/plans/p/plan.json").read_bytes()
    cp = run_forge(repo, "plan", str(second))
    assert cp.returncode == 2
    assert "already recorded from" in cp.stderr and str(first) in cp.stderr
    assert (repo / ".git/forge/plans/p/plan.json").read_bytes() == before


def test_worktree_root_flag_places_the_slots_and_reaches_the_tasks(
    repo: Path, tmp_path: Path
) -> None:
    root = tmp_path / "elsewhere"
    body = (
        'verify = "true"\n[[task]]\nid = "a"\n'
        'run = "echo $FORGE_WORKTREES > a.txt"\nfiles = ["a.txt"]\n'
    )
    cp = plan_and_run(repo, write_plan(tmp_path, body), "--worktree-root", str(root))
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert (root / "repo" / "p").is_dir()  # the slots, not under FORGE_WORKTREES
    assert list((root / "repo" / ".verify").glob("shared-*"))  # nor the verification checkouts
    seen = git(repo, "show", "forge/p-integration:a.txt")
    assert seen == str(root.resolve())  # a task's own forge calls see the same root
