"""Containment through the real CLI: what forge refuses, what it measures, what it
believes (the escape corpus is tests/run/contain/test_escape.py)."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

from helpers.gitkit import git, run_forge
from helpers.runkit import plan_and_run, state, write_plan

from forge.base import seal

ONE = '[[task]]\nid = "a"\nrun = "echo a > a.txt"\nfiles = ["a.txt"]\n'


def test_a_worktree_root_inside_the_working_tree_is_refused(repo: Path, tmp_path: Path) -> None:
    assert run_forge(repo, "plan", str(write_plan(tmp_path, ONE))).returncode == 0
    cp = run_forge(repo, "run", "--worktree-root", str(repo / "wt"))
    assert cp.returncode == 2, cp.stdout + cp.stderr
    assert cp.stderr.count("\n") == 1 and "inside your working tree" in cp.stderr
    assert not (repo / "wt").exists()


def test_a_slot_is_a_repository_of_its_own(repo: Path, tmp_path: Path) -> None:
    plan = write_plan(
        tmp_path,
        '[[task]]\nid = "a"\nfiles = ["a.txt"]\n'
        "run = 'git rev-parse --git-common-dir > /dev/null && git rev-parse --absolute-git-dir > a.txt'\n",
    )
    assert plan_and_run(repo, plan).returncode == 0
    gitdir = git(repo, "show", "forge/p-integration:a.txt")
    assert gitdir.endswith("/slot-1/.git"), gitdir
    assert git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1


def test_the_report_names_what_changed_in_the_users_checkout(repo: Path, tmp_path: Path) -> None:
    plan = write_plan(
        tmp_path,
        f'[[task]]\nid = "a"\nfiles = ["a.txt"]\nrun = "echo a > a.txt; echo x > {repo}/README.md"\n',
    )
    cp = plan_and_run(repo, plan)
    assert cp.returncode == 0, cp.stderr
    assert "not touched" not in cp.stdout
    assert "working tree changed: README.md" in cp.stdout
    assert state(repo)["touched"] == ["working tree changed: README.md"]
    st = run_forge(repo, "status")
    assert "working tree changed: README.md" in st.stdout, st.stdout


def test_the_key_is_made_once_with_mode_0600(repo: Path, tmp_path: Path) -> None:
    assert plan_and_run(repo, write_plan(tmp_path, 'verify = "true"\n' + ONE)).returncode == 0
    key = Path(os.environ["HOME"]) / ".local" / "state" / "forge" / "key"
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    records = list((repo / ".git" / "forge" / "verify" / "records").iterdir())
    assert records and all(seal.valid(json.loads(r.read_text())) for r in records)


def test_accept_refuses_a_verification_forge_did_not_seal(repo: Path, tmp_path: Path) -> None:
    assert plan_and_run(repo, write_plan(tmp_path, 'verify = "true"\n' + ONE)).returncode == 0
    path = repo / ".git" / "forge" / "plans" / "p" / "state.json"
    data = json.loads(path.read_text())
    data["verification"].pop("seal")
    path.write_text(json.dumps(data))
    cp = run_forge(repo, "accept")
    assert cp.returncode == 2, cp.stdout + cp.stderr
    assert "does not carry forge's seal" in cp.stderr


def test_the_sandbox_without_bwrap_is_refused_in_one_line(repo: Path, tmp_path: Path) -> None:
    assert run_forge(repo, "plan", str(write_plan(tmp_path, ONE))).returncode == 0
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    git_bin = shutil.which("git")
    assert git_bin is not None
    (bin_dir / "git").symlink_to(git_bin)
    env = {**os.environ, "PATH": str(bin_dir)}
    cp = subprocess.run(
        [sys.executable, "-m", "forge", "run", "--sandbox"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert cp.returncode == 2, cp.stdout + cp.stderr
    assert cp.stderr.count("\n") == 1 and "apt-get install bubblewrap" in cp.stderr
    assert not (repo / ".git" / "forge" / "plans" / "p" / "state.json").exists()


def test_nothing_climbs_into_a_repository_around_the_worktrees(repo: Path, tmp_path: Path) -> None:
    """The worktree root inside another repository; a task removes its slot's .git:
    neither its own git commands nor forge's reach the outer repository."""
    outer = tmp_path / "outer"
    outer.mkdir()
    git(outer, "init", "-q")
    root = outer / "wt"
    plan = write_plan(
        tmp_path,
        '[[task]]\nid = "a"\nfiles = ["a.txt"]\n'
        "run = 'echo a > a.txt; rm -rf .git; git add -A; git rev-parse --show-toplevel'\n",
    )
    assert run_forge(repo, "plan", str(plan)).returncode == 0
    cp = run_forge(repo, "run", "--worktree-root", str(root))
    assert cp.returncode == 5, cp.stdout + cp.stderr
    assert "broke its worktree's git directory" in cp.stdout
    assert not git(outer, "ls-files"), "nothing was staged in the outer repository"
    log = next((repo / ".git" / "forge" / "plans" / "p" / "logs" / "a").rglob("agent.log"))
    assert "not a git repository" in log.read_text()


def test_forges_own_git_dir_is_beside_the_slot_and_made_again(repo: Path, tmp_path: Path) -> None:
    """forge's git dir of a slot lives beside it (`slot-N.git`); a slot without one
    (made by an older forge, or the folder removed) gets one at the commit its own
    `.git` has checked out, and its task goes on there."""
    ok = tmp_path / "ok"
    plan = write_plan(
        tmp_path, f'[[task]]\nid = "a"\nfiles = ["a.txt"]\nrun = "test -e {ok} && echo a > a.txt"\n'
    )
    cp = plan_and_run(repo, plan)
    assert cp.returncode == 5, cp.stdout + cp.stderr
    slot = Path(state(repo)["slots"]["slot-1"]["path"])
    view = slot.with_name(slot.name + ".git")
    assert (view / "HEAD").is_file() and (slot / ".git" / "HEAD").is_file()
    assert "filter" not in (view / "config").read_text()
    shutil.rmtree(view)
    ok.write_text("")
    cp = run_forge(repo, "retry", "a")
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert git(repo, "show", "forge/p-integration:a.txt") == "a"
    assert view.is_dir()


def test_a_corrupt_object_of_the_task_never_reaches_the_users_store(
    repo: Path, tmp_path: Path
) -> None:
    """The agent commits, then makes the loose object of its file hold another blob:
    the checking fetch refuses the commit, and forge commits the files themselves."""
    corrupt = (
        "echo a > a.txt && git add a.txt && git commit -qm mine"
        " && o=$(git rev-parse HEAD:a.txt) && b=$(echo b | git hash-object -w --stdin)"
        " && f=.git/objects/$(echo $o | cut -c1-2)/$(echo $o | cut -c3-)"
        " && chmod u+w $f && cp .git/objects/$(echo $b | cut -c1-2)/$(echo $b | cut -c3-) $f"
    )
    plan = write_plan(tmp_path, f'[[task]]\nid = "a"\nfiles = ["a.txt"]\nrun = "{corrupt}"\n')
    cp = plan_and_run(repo, plan)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert git(repo, "show", "forge/p-integration:a.txt") == "a"
    assert "mine" not in git(repo, "log", "--format=%s", "forge/p-integration")
    subprocess.run(["git", "fsck", "--strict"], cwd=repo, check=True, capture_output=True)


def test_the_users_own_filters_apply_to_forges_commits(repo: Path, tmp_path: Path) -> None:
    """A filter of the user's config (as git-lfs is) cleans what forge commits; one
    the task defines in its slot does not run."""
    git(repo, "config", "filter.up.clean", "tr a-z A-Z")
    (repo / ".gitattributes").write_text("*.txt filter=up\n")
    git(repo, "add", ".gitattributes")
    git(repo, "commit", "-qm", "attributes")
    ran = tmp_path / "ran"
    run = f"git config filter.up.clean 'touch {ran}; cat'; echo abc > a.txt"
    plan = write_plan(tmp_path, f'[[task]]\nid = "a"\nfiles = ["a.txt"]\nrun = "{run}"\n')
    cp = plan_and_run(repo, plan)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert git(repo, "show", "forge/p-integration:a.txt") == "ABC"
    assert not ran.exists()
