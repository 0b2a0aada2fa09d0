"""What changes every git command's answer is part of the user's fingerprint: a task
(no sandbox) that writes an alternate, a replace ref, grafts, `shallow`, attributes,
excludes, config or a hook into the user's git dir has it put back as it was, named,
and fails; `git gc` by the user is told apart from objects removed."""

from __future__ import annotations

import subprocess
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


_GRAFT = "git -C {repo} rev-parse HEAD > {repo}/.git/"


@pytest.mark.parametrize(
    ("trick", "named"),
    [
        (
            "echo $PWD/.git/objects >> {repo}/.git/objects/info/alternates",
            "objects/info/alternates",
        ),
        (
            "echo http://x/ > {repo}/.git/objects/info/http-alternates",
            "objects/info/http-alternates",
        ),
        (_GRAFT + "info/grafts", "info/grafts"),
        (_GRAFT + "shallow", "shallow"),
        (
            "mkdir -p {repo}/.git/info; echo '* merge=union' > {repo}/.git/info/attributes",
            "info/attributes",
        ),
        ("mkdir -p {repo}/.git/info; echo '*.py' >> {repo}/.git/info/exclude", "info/exclude"),
        ("git -C {repo} config core.fsmonitor 'touch /tmp/ran'", "config"),
        (
            "printf '#!/bin/sh\\ntouch ran\\n' > {repo}/.git/hooks/pre-commit"
            " && chmod +x {repo}/.git/hooks/pre-commit",
            "hooks/pre-commit",
        ),
        ("ln -sf /dev/null {repo}/.git/config", "config"),
        (
            "git -C {repo} replace $(git -C {repo} rev-parse HEAD:README.md)"
            " $(echo evil | git -C {repo} hash-object -w --stdin)",
            "refs/replace/",
        ),
    ],
    ids=[
        "alternates",
        "http-alternates",
        "grafts",
        "shallow",
        "attributes",
        "exclude",
        "config",
        "hook",
        "config-link",
        "replace",
    ],
)
def test_what_changes_gits_answers_is_put_back_and_fails_the_task(
    repo: Path, tmp_path: Path, trick: str, named: str
) -> None:
    (repo / ".git" / "info").mkdir(exist_ok=True)
    (repo / ".git" / "info" / "exclude").write_text("# mine\n")
    before = _git_files(repo)
    out = _run(repo, tmp_path, trick.format(repo=repo))
    assert "put back as they were: " + named in out, out
    assert statuses(repo) == {"a": "FAILED"}, out
    assert _git_files(repo) == before
    assert git(repo, "for-each-ref", "refs/replace") == ""
    cp = subprocess.run(["git", "status"], cwd=repo, capture_output=True, text=True, check=False)
    assert cp.returncode == 0 and cp.stderr == "", cp.stderr
    assert run_forge(repo, "accept").returncode != 0  # nothing passed to accept


def _git_files(repo: Path) -> dict[str, tuple[bool, bytes]]:
    """Each file under the user's git dir but its objects, refs and logs (forge
    writes there): whether it is a link, and its bytes."""
    found = {}
    root = repo / ".git"
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        owned = rel.split("/")[0] in ("objects", "refs", "logs", "forge", "index", "packed-refs")
        if owned and not rel.startswith("objects/info"):
            continue
        if path.is_symlink() or path.is_file():
            data = b"" if path.is_symlink() else path.read_bytes()
            found[rel] = (path.is_symlink(), data)
    return found


def test_a_lanes_change_to_the_git_files_is_put_back_at_the_runs_end(
    repo: Path, tmp_path: Path
) -> None:
    """A verification lane (no sandbox) that writes a replace ref and a hook into the
    user's git dir: no task's attempt saw it; the run's end puts both back and says
    so, no task is blamed, and `forge accept` goes ahead."""
    trick = (
        f"git -C {repo} replace $(echo done | git -C {repo} hash-object -w --stdin)"
        f" $(echo evil | git -C {repo} hash-object -w --stdin);"
        f" echo 'exit 1' > {repo}/.git/hooks/post-merge; grep -q done out.txt"
    )
    out = _run(repo, tmp_path, "true", verify=trick)
    assert "git files put back as they were: hooks/post-merge, refs/replace/" in out, out
    assert statuses(repo) == {"a": "MERGED"}
    assert not (repo / ".git" / "hooks" / "post-merge").exists()
    assert git(repo, "for-each-ref", "refs/replace") == ""
    cp = run_forge(repo, "accept")
    assert cp.returncode == 0, cp.stdout + cp.stderr
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


@pytest.mark.usefixtures("unboxed")  # the task kills forge by its pid on the machine
def test_a_run_killed_after_a_task_planted_an_alternate_is_put_back_by_the_next(
    repo: Path, tmp_path: Path
) -> None:
    """The baseline is on disk before any task runs: a task (no sandbox) that plants an
    alternate and then kills forge with `kill -9` leaves the user's git files wrong,
    and the next run of the plan puts them back from the killed run's baseline, not
    from what its task left."""
    before = _git_files(repo)
    marker = tmp_path / "once"
    owner = repo / ".git" / "forge" / "plans" / "p" / "owner.json"
    read_pid = f'python3 -c \'import json; print(json.load(open("{owner}"))["pid"])\''
    trick = (
        f"if [ ! -e {marker} ]; then touch {marker};"
        f" echo /nonexistent/objects >> {repo}/.git/objects/info/alternates;"
        f" kill -9 $({read_pid}); sleep 30; fi"
    )
    plan = write_plan(
        tmp_path,
        f'sandbox = false\n[[task]]\nid = "a"\nfiles = ["out.txt"]\n'
        f"run = '''{trick}; echo done > out.txt'''\n",
    )
    killed = plan_and_run(repo, plan)
    assert killed.returncode == -9, killed.stdout + killed.stderr
    assert (repo / ".git" / "objects" / "info" / "alternates").exists()
    cp = run_forge(repo, "run")
    out = cp.stdout + cp.stderr
    assert "Traceback" not in out, out
    assert "put back as they were: objects/info/alternates" in out, out
    assert _git_files(repo) == before
    assert not (repo / ".git" / "forge" / "plans" / "p" / "gitfiles.json").exists()
