"""What changes every git command's answer is part of the user's fingerprint: a task
(no sandbox) that writes an alternate, a replace ref, grafts, `shallow`, attributes or
excludes into the user's git dir is named; `git gc` by the user is told apart from
objects removed; forge's own git reads no replace ref."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.gitkit import commit_all, git, run_forge
from helpers.runkit import plan_and_run, statuses, write_plan


def _run(repo: Path, tmp_path: Path, trick: str, *, verify: str = "true") -> str:
    plan = write_plan(
        tmp_path,
        f'verify = "{verify}"\n[[task]]\nid = "a"\nfiles = ["out.txt"]\n'
        f"run = '''{trick}; echo done > out.txt'''\n",
    )
    cp = plan_and_run(repo, plan)
    out = cp.stdout + cp.stderr
    assert "Traceback" not in out, out
    return out


@pytest.mark.parametrize(
    ("trick", "named"),
    [
        (
            "echo $PWD/.git/objects >> {repo}/.git/objects/info/alternates",
            "git files changed: objects/info/alternates",
        ),
        (
            "echo http://x/ > {repo}/.git/objects/info/http-alternates",
            "git files changed: objects/info/http-alternates",
        ),
        (
            "git -C {repo} rev-parse HEAD > {repo}/.git/info/grafts",
            "git files changed: info/grafts",
        ),
        ("git -C {repo} rev-parse HEAD > {repo}/.git/shallow", "git files changed: shallow"),
        (
            "mkdir -p {repo}/.git/info; echo '* merge=union' > {repo}/.git/info/attributes",
            "git files changed: info/attributes",
        ),
        (
            "mkdir -p {repo}/.git/info; echo '*.py' >> {repo}/.git/info/exclude",
            "git files changed: info/exclude",
        ),
        (
            "git -C {repo} replace $(git -C {repo} rev-parse HEAD:README.md)"
            " $(echo evil | git -C {repo} hash-object -w --stdin)",
            "refs changed: refs/replace/",
        ),
    ],
    ids=["alternates", "http-alternates", "grafts", "shallow", "attributes", "exclude", "replace"],
)
def test_what_changes_gits_answers_is_named(
    repo: Path, tmp_path: Path, trick: str, named: str
) -> None:
    out = _run(repo, tmp_path, trick.format(repo=repo))
    assert named in out, out
    assert "were not touched" not in out, out


def test_forge_reads_no_replace_ref(repo: Path, tmp_path: Path) -> None:
    """A replace ref a task wrote makes no never-verified content reach the user's
    working tree through `forge accept`."""
    trick = (
        f"git -C {repo} replace $(echo done | git -C {repo} hash-object -w --stdin)"
        f" $(echo evil | git -C {repo} hash-object -w --stdin)"
    )
    _run(repo, tmp_path, trick, verify="grep -q done out.txt")
    assert statuses(repo) == {"a": "MERGED"}
    assert run_forge(repo, "accept").returncode == 0
    assert (repo / "out.txt").read_text() == "done\n"


def test_a_users_gc_during_a_run_is_no_lost_object(repo: Path, tmp_path: Path) -> None:
    """Objects moved into packs (`git repack -a -d`, what `git gc` does) are said as
    such, and `forge accept` goes ahead."""
    out = _run(repo, tmp_path, f"git -C {repo} repack -a -d -q")
    assert "object store repacked (git gc or git repack): " in out, out
    assert "every object still there" in out, out
    assert "object store changed" not in out, out
    assert statuses(repo) == {"a": "MERGED"}
    cp = run_forge(repo, "accept")
    assert cp.returncode == 0, cp.stdout + cp.stderr


def test_objects_removed_are_still_named(repo: Path, tmp_path: Path) -> None:
    (repo / "old.txt").write_text("only in history\n")
    commit_all(repo, "old")
    blob = git(repo, "rev-parse", "HEAD:old.txt")
    (repo / "old.txt").unlink()
    commit_all(repo, "no old")  # no checkout of forge's writes the blob back
    trick = f"rm -f {repo}/.git/objects/{blob[:2]}/{blob[2:]}"
    out = _run(repo, tmp_path, trick)
    assert "object store changed: 1 object removed" in out, out
    assert run_forge(repo, "accept").returncode == 2
