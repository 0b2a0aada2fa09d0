"""A file name git can store need not be UTF-8: one such name works in the user's
repository, in a task's work and in a verification checkout, and is shown as git
shows it (`\\377`), never a traceback."""

from __future__ import annotations

import os
from pathlib import Path

from helpers.gitkit import run_forge
from helpers.runkit import plan_and_run, statuses, write_plan
from helpers.userside import comparable, git_bytes, unchanged_but_new, user_side

RAW = "\\377"  # how the plan's shell writes the byte 0xFF, and how forge shows it
MADE = f"printf x > \"$(printf 'made-{RAW}.txt')\""


def _no_traceback(out: str) -> None:
    assert "Traceback" not in out and "codec" not in out, out


def test_an_untracked_name_that_is_not_utf8_in_the_users_repository(
    repo: Path, tmp_path: Path
) -> None:
    (repo / os.fsdecode(b"untracked-\xff.txt")).write_text("mine\n")
    plan = write_plan(
        tmp_path,
        'verify = "true"\n[[task]]\nid = "a"\nfiles = ["out.txt"]\nrun = "echo done > out.txt"\n',
    )
    before = user_side(repo)
    cp = plan_and_run(repo, plan)
    _no_traceback(cp.stdout + cp.stderr)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert statuses(repo) == {"a": "MERGED"}
    assert "were not touched" in cp.stdout
    assert unchanged_but_new(before, user_side(repo)) == comparable(before)


def test_a_changed_untracked_name_that_is_not_utf8_is_named_escaped(
    repo: Path, tmp_path: Path
) -> None:
    name = repo / os.fsdecode(b"untracked-\xff.txt")
    name.write_text("mine\n")
    plan = write_plan(
        tmp_path,
        f'[[task]]\nid = "a"\nfiles = ["out.txt"]\nrun = "echo more >> {repo}/untracked-*.txt; echo x > out.txt"\n',
    )
    cp = plan_and_run(repo, plan)
    _no_traceback(cp.stdout + cp.stderr)
    assert f"working tree changed: untracked-{RAW}.txt" in cp.stdout, cp.stdout


def test_a_task_makes_a_name_that_is_not_utf8(repo: Path, tmp_path: Path) -> None:
    plan = write_plan(
        tmp_path,
        f"verify = \"true\"\n[[task]]\nid = \"a\"\nfiles = [\"made-*\"]\nrun = '''{MADE}'''\n",
    )
    before = user_side(repo)
    cp = plan_and_run(repo, plan)
    _no_traceback(cp.stdout + cp.stderr)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert statuses(repo) == {"a": "MERGED"}
    names = git_bytes(repo, "ls-tree", "-z", "--name-only", "forge/p-integration").split(b"\0")
    assert b"made-\xff.txt" in names
    assert unchanged_but_new(before, user_side(repo)) == comparable(before)


def test_a_name_that_is_not_utf8_outside_the_tasks_files_is_named(
    repo: Path, tmp_path: Path
) -> None:
    plan = write_plan(
        tmp_path,
        f"[[task]]\nid = \"a\"\nfiles = [\"out.txt\"]\nrun = '''{MADE}; echo x > out.txt'''\n",
    )
    cp = plan_and_run(repo, plan)
    _no_traceback(cp.stdout + cp.stderr)
    assert cp.returncode == 5, cp.stdout + cp.stderr
    assert f"outside its declared files: made-{RAW}.txt" in cp.stdout, cp.stdout


def test_the_verification_leaves_an_untracked_name_that_is_not_utf8(
    repo: Path, tmp_path: Path
) -> None:
    """The lane's stray file fails the candidate by name; the next run is not wedged."""
    lane = f"test -e out.txt || exit 0; printf x > \"$(printf 'v-{RAW}.txt')\""
    plan = write_plan(
        tmp_path,
        f"verify = '''{lane}'''\nverify_reruns = 0\n"
        '[[task]]\nid = "a"\nfiles = ["out.txt"]\nrun = "echo done > out.txt"\n',
    )
    before = user_side(repo)
    cp = plan_and_run(repo, plan)
    _no_traceback(cp.stdout + cp.stderr)
    assert cp.returncode == 5, cp.stdout + cp.stderr
    assert f"changed the checkout: v-{RAW}.txt" in cp.stdout, cp.stdout
    assert statuses(repo) == {"a": "FAILED"}
    again = run_forge(repo, "run")
    _no_traceback(again.stdout + again.stderr)
    assert again.returncode == 5, again.stdout + again.stderr
    assert unchanged_but_new(before, user_side(repo)) == comparable(before)


def test_the_verification_and_setup_leave_ignored_names_that_are_not_utf8(
    repo: Path, tmp_path: Path
) -> None:
    """Setup's product is kept; the lane's own leftover is scrubbed before the next run."""
    (repo / ".gitignore").write_text("*.ign\n")
    git_bytes(repo, "add", ".gitignore")
    git_bytes(repo, "commit", "-q", "-m", "ignore")
    setup = f"printf s > \"$(printf 's-{RAW}.ign')\""
    lane = (
        f"test -e \"$(printf 's-{RAW}.ign')\" || exit 3;"
        f" test -e \"$(printf 'w-{RAW}.ign')\" && exit 4; printf w > \"$(printf 'w-{RAW}.ign')\""
    )
    plan = write_plan(
        tmp_path,
        f"setup = '''{setup}'''\nverify = '''{lane}'''\nverify_reruns = 0\n"
        '[[task]]\nid = "a"\nfiles = ["a.txt"]\nrun = "echo a > a.txt"\n'
        '[[task]]\nid = "b"\nfiles = ["b.txt"]\ndeps = ["a"]\nrun = "echo b > b.txt"\n',
    )
    before = user_side(repo)
    cp = plan_and_run(repo, plan)
    _no_traceback(cp.stdout + cp.stderr)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert statuses(repo) == {"a": "MERGED", "b": "MERGED"}
    assert unchanged_but_new(before, user_side(repo)) == comparable(before)


def test_a_new_plan_file_in_plans_is_not_a_change_to_the_users_repository(
    repo: Path, tmp_path: Path
) -> None:
    # A person drafts the next plan into plans/ while the run runs; a file elsewhere
    # is still named.
    plan = write_plan(
        tmp_path,
        f'[[task]]\nid = "a"\nfiles = ["out.txt"]\nrun = \'\'\'mkdir -p {repo}/plans; '
        f"echo x > {repo}/plans/next.toml; echo y > {repo}/notes.txt; echo x > out.txt'''\n",
    )
    cp = plan_and_run(repo, plan)
    assert "working tree changed: notes.txt" in cp.stdout, cp.stdout
    assert "plans/next.toml" not in cp.stdout
