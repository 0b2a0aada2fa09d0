"""Nothing one task leaves runs in the next: what an earlier task wrote into setup's
products in a reused slot, a daemon it started, a repository it hid in its work.
Each case attacks through the CLI, as whoever runs the tests (root here)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.gitkit import commit_all, git
from helpers.runkit import plan_and_run, state, statuses, write_plan

from forge.base import sandbox

PTH = "import os; open('injected.txt', 'a').write('x')"


def test_a_pth_written_into_a_slots_setup_products_does_not_reach_the_next_task(
    repo: Path, tmp_path: Path
) -> None:
    """Task a writes a `.pth` into the slot's `.venv` (made by setup); task b, next in
    the same slot, runs Python: the change is named, setup runs again, and b's work
    holds only b's file."""
    (repo / ".gitignore").write_text(".venv/\n")
    commit_all(repo, "ignore the venv")
    setup = f"{sys.executable} -m venv --without-pip .venv"
    plant = (
        'sp=$(.venv/bin/python -c "import sysconfig; print(sysconfig.get_paths()[\\"purelib\\"])")'
        f' && echo "{PTH}" > $sp/evil.pth && echo a > a.txt'
    )
    plan = write_plan(
        tmp_path,
        f"max_parallel = 1\nsetup = '''{setup}'''\n"
        '[[task]]\nid = "a"\nfiles = ["a.txt"]\n'
        f"run = '''{plant}'''\n"
        '[[task]]\nid = "b"\nfiles = ["b.txt"]\ndeps = ["a"]\n'
        "run = '''.venv/bin/python -c pass && echo b > b.txt'''\n",
    )
    cp = plan_and_run(repo, plan)
    out = cp.stdout + cp.stderr
    assert cp.returncode == 0, out
    assert statuses(repo) == {"a": "MERGED", "b": "MERGED"}, out
    tasks = state(repo)["tasks"]
    assert tasks["a"]["slot"] == tasks["b"]["slot"], "the test needs one slot reused"
    warnings = " ".join(tasks["b"]["warnings"])
    assert "setup's products changed since setup ran (" in warnings, warnings
    assert "evil.pth" in warnings, warnings
    files = git(repo, "ls-tree", "-r", "--name-only", "forge/p-integration").split()
    assert "injected.txt" not in files and "b.txt" in files, files


def test_an_alternate_into_a_slot_is_put_back_and_leaves_no_broken_store(
    repo: Path, tmp_path: Path
) -> None:
    """Task a (no sandbox) makes the user's store borrow its slot's objects, then
    commits its work there: the alternate is put back as it was (none), the task
    fails naming it, and once the slot is gone `git fsck` and `git status` say
    nothing of a missing object directory."""
    trick = (
        f"echo $PWD/.git/objects >> {repo}/.git/objects/info/alternates"
        " && echo 'only in this task' > out.txt && git add out.txt"
        " && git -c user.name=a -c user.email=a@a commit -qm mine"
    )
    plan = write_plan(
        tmp_path,
        'verify = "grep -q only out.txt"\n[[task]]\nid = "a"\nfiles = ["out.txt"]\n'
        f"run = '''{trick}'''\n",
    )
    cp = plan_and_run(repo, plan)
    out = cp.stdout + cp.stderr
    assert "put back as they were: objects/info/alternates" in out, out
    assert statuses(repo) == {"a": "FAILED"}, out
    assert not (repo / ".git" / "objects" / "info" / "alternates").exists()
    slot = Path(state(repo)["slots"]["slot-1"]["path"])
    for gone in (slot, slot.with_name(slot.name + ".git")):
        shutil.rmtree(gone, ignore_errors=True)
    for argv in (["git", "fsck", "--connectivity-only", "--no-dangling"], ["git", "status"]):
        done = subprocess.run(argv, cwd=repo, capture_output=True, text=True, check=False)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "does not exist" not in done.stderr and "missing" not in done.stdout, done.stderr


def _running(mark: str) -> list[int]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if mark.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.append(int(pid))
        except OSError:
            continue
    return found


def _daemon(loop: str, mark: str) -> str:
    """A daemon that leaves forge's process group and drops its tag (no sandbox)."""
    return f"setsid -f env -i sh -c '{loop}; : {mark}' > /dev/null 2>&1"


def test_a_daemon_a_task_leaves_is_stopped_and_named_before_the_next_task(
    repo: Path, tmp_path: Path
) -> None:
    """Task a leaves a daemon appending to b.txt in its slot; task b, next in that
    slot, writes b.txt: b's work is its own, a's result names the daemon, nothing
    of it runs after the run."""
    mark = f"forge-daemon-{os.getpid()}-a"
    loop = "while :; do [ -e b.txt ] && echo evil >> b.txt; sleep 0.01; done"
    plan = write_plan(
        tmp_path,
        "max_parallel = 1\n"
        '[[task]]\nid = "a"\nfiles = ["a.txt"]\n'
        f"run = '''{_daemon(loop, mark)}; echo a > a.txt'''\n"
        '[[task]]\nid = "b"\nfiles = ["b.txt"]\ndeps = ["a"]\n'
        "run = '''echo b > b.txt'''\n",
    )
    cp = plan_and_run(repo, plan)
    out = cp.stdout + cp.stderr
    left = _running(mark)
    for pid in left:
        os.kill(pid, 9)
    assert not left, "the daemon outlived its task"
    assert statuses(repo) == {"a": "MERGED", "b": "MERGED"}, out
    warnings = " ".join(state(repo)["tasks"]["a"]["warnings"])
    # Named as it was when stopped: the daemon execs setsid -> env -> sh.
    assert re.search(r"left processes running, stopped: (setsid|env|sh) \(pid ", warnings), warnings
    assert git(repo, "show", "forge/p-integration:b.txt") == "b"


def test_a_daemon_a_verification_leaves_is_stopped_and_named(repo: Path, tmp_path: Path) -> None:
    """A lane's daemon that would plant a file in the checkout for the next run."""
    mark = f"forge-daemon-{os.getpid()}-v"
    loop = "sleep 1; while :; do touch planted.pyc; sleep 0.01; done"
    plan = write_plan(
        tmp_path,
        f"verify = '''{_daemon(loop, mark)}; true'''\n"
        '[[task]]\nid = "a"\nfiles = ["a.txt"]\nrun = "echo a > a.txt"\n',
    )
    cp = plan_and_run(repo, plan)
    out = cp.stdout + cp.stderr
    left = _running(mark)
    for pid in left:
        os.kill(pid, 9)
    assert not left, "the daemon outlived its verification"
    assert re.search(
        r"lane verify: left processes running, stopped: (setsid|env|sh) \(pid ", out
    ), out


NESTED = {
    "nested-repository": "git init -q sub && echo x > sub/f.txt && git -C sub add f.txt"
    " && git -C sub -c user.name=a -c user.email=a@a commit -qm x",
    "git-file": "mkdir -p sub && echo x > sub/f.txt && echo 'gitdir: {outside}' > sub/.git",
}


@pytest.mark.parametrize("trick", sorted(NESTED), ids=str)
def test_a_hidden_git_in_a_tasks_work_is_not_committed_as_a_gitlink(
    repo: Path, tmp_path: Path, trick: str
) -> None:
    """A repository (or a `.git` file naming one elsewhere) inside a task's work would
    land as a gitlink to a commit the user's store lacks: it is refused, named."""
    outside = tmp_path / "outside"
    git(tmp_path, "init", "-q", str(outside))
    run = NESTED[trick].format(outside=outside / ".git") + " && echo done > out.txt"
    plan = write_plan(
        tmp_path,
        f"verify = \"true\"\n[[task]]\nid = \"a\"\nfiles = [\".\"]\nrun = '''{run}'''\n",
    )
    cp = plan_and_run(repo, plan)
    out = cp.stdout + cp.stderr
    tree = git(repo, "ls-tree", "-r", "forge/p-integration")
    assert "160000" not in tree, tree
    assert "holds a git repository of its own: sub" in out, out


def test_a_sandboxed_command_stopped_gets_its_grace(repo: Path, tmp_path: Path) -> None:
    """TERM reaches the command in its pid namespace, not bubblewrap first (whose end
    would KILL the whole namespace at once): its TERM handler finishes."""
    missing = sandbox.unavailable()
    if missing:
        pytest.skip(missing)
    run = 'trap "sleep 0.2; echo cleaned > cleaned.txt; exit 1" TERM; sleep 600 & wait'
    plan = write_plan(
        tmp_path,
        'sandbox = true\ntimeout = "1s"\n[[task]]\nid = "a"\nfiles = ["cleaned.txt"]\n'
        f"run = '''{run}'''\n",
    )
    cp = plan_and_run(repo, plan)
    assert statuses(repo) == {"a": "TIMEOUT"}, cp.stdout + cp.stderr
    slot = Path(state(repo)["slots"]["slot-1"]["path"])
    assert (slot / "cleaned.txt").is_file(), "the TERM handler did not run to its end"
