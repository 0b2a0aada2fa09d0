"""Two repositories of one folder name under one FORGE_WORKTREES each get a folder of
their own: the first keeps `<root>/<name>`, the other `<root>/<name>-<hash>`, each
claimed by a marker naming its repository. Each verifies in its own checkouts
(the verification pool's locks are per repository: a shared folder let one
repository's verification run in the other's checkout), and `forge status --disk`
and `forge clean` find each one's folders. A `<root>/<name>` an older forge made
(no marker) stays with the repository whose checkouts are in it."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from helpers.gitkit import commit_all, git, run_forge
from helpers.runkit import plan_and_run, spawn_forge, statuses, write_plan

from forge.base.settings import Settings
from forge.errors import ForgeError
from forge.git.repo import discover
from forge.git.worktree_root import marker, owner_of, worktrees_for

TASKS = ["t1", "t2", "t3"]


def _repository(where: Path, side: str) -> Path:
    """A repository named `repo` under `where`, with a file only it has, which its
    verification (forge.toml) checks is in the checkout it runs in."""
    path = where / "repo"
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    (path / f"only_{side}.txt").write_text(f"{side}\n")
    (path / "forge.toml").write_text(f"[verify]\ncommand = 'test -f only_{side}.txt'\n")
    commit_all(path, f"repository {side}")
    return path


def _plan(tmp: Path, side: str) -> Path:
    body = "max_parallel = 2\n" + "".join(
        f'[[task]]\nid = "{t}"\nrun = "echo {t} > {t}.txt"\nfiles = ["{t}.txt"]\n' for t in TASKS
    )
    folder = tmp / f"plan-{side}"
    folder.mkdir()
    return write_plan(folder, body)


def _root() -> Path:
    return Path(os.environ["FORGE_WORKTREES"]).resolve()


def _common(repo: Path) -> Path:
    return (repo / ".git").resolve()


def _verified_in(repo: Path) -> set[Path]:
    """The folders of the checkouts the repository's verifications ran in."""
    books = repo / ".git" / "forge" / "verify" / "pool"
    members = {b.stem for b in books.glob("shared-*.json")}
    return {discover(repo).worktrees_root() / ".verify" / m for m in members}


def test_two_repositories_of_one_name_each_verify_in_their_own_folder(tmp_path: Path) -> None:
    a, b = _repository(tmp_path / "a", "a"), _repository(tmp_path / "b", "b")
    for repo, side in ((a, "a"), (b, "b")):
        cp = plan_and_run(repo, _plan(tmp_path, side))
        assert cp.returncode == 0, cp.stdout + cp.stderr
        assert statuses(repo) == dict.fromkeys(TASKS, "MERGED")
    root = _root()
    ours, theirs = discover(a).worktrees_root(), discover(b).worktrees_root()
    assert ours == root / "repo"  # the first keeps the folder named after it
    assert theirs.parent == root and theirs.name.startswith("repo-") and theirs != ours
    assert owner_of(ours) == _common(a) and owner_of(theirs) == _common(b)
    assert all(p.is_dir() for p in _verified_in(a) | _verified_in(b))
    assert all(p.is_relative_to(theirs) for p in _verified_in(b)), _verified_in(b)
    # status --disk counts each one's own folders; clean removes b's, leaves a's
    disk = json.loads(run_forge(b, "status", "--disk", "--json").stdout)["disk"]
    assert disk["task worktrees"] > 0 and disk["verification checkouts"] > 0, disk
    assert run_forge(b, "accept").returncode == 0
    cp = run_forge(b, "clean")
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert not (theirs / "p").exists() and not (theirs / ".verify").exists()
    assert (ours / "p").is_dir() and list((ours / ".verify").glob("shared-*"))
    assert discover(b).worktrees_root() == theirs  # the claim stays


def test_two_repositories_of_one_name_run_at_once(tmp_path: Path) -> None:
    a, b = _repository(tmp_path / "a", "a"), _repository(tmp_path / "b", "b")
    for repo, side in ((a, "a"), (b, "b")):
        assert run_forge(repo, "plan", str(_plan(tmp_path, side))).returncode == 0
    runs = [spawn_forge(repo, "run") for repo in (a, b)]
    for run in runs:
        out, err = run.communicate(timeout=240)
        assert run.returncode == 0, out + err
    assert statuses(a) == statuses(b) == dict.fromkeys(TASKS, "MERGED")
    folders = {discover(repo).worktrees_root() for repo in (a, b)}
    assert len(folders) == 2 and _root() / "repo" in folders


def test_an_unmarked_folder_stays_with_the_repository_that_made_it(tmp_path: Path) -> None:
    a, b = _repository(tmp_path / "a", "a"), _repository(tmp_path / "b", "b")
    cp = plan_and_run(a, _plan(tmp_path, "a"))
    assert cp.returncode == 0, cp.stdout + cp.stderr
    folder = _root() / "repo"
    marker(folder).unlink(missing_ok=True)  # as an older forge left it: a's checkouts, no marker
    # b comes first: it tells the folder is a's from the checkouts in it
    cp = plan_and_run(b, _plan(tmp_path, "b"))
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert statuses(b) == dict.fromkeys(TASKS, "MERGED")
    assert owner_of(folder) == _common(a)
    assert discover(b).worktrees_root() != folder
    assert discover(a).worktrees_root() == folder
    disk = json.loads(run_forge(a, "status", "--disk", "--json").stdout)["disk"]
    assert disk["task worktrees"] > 0 and disk["verification checkouts"] > 0, disk


def test_an_unmarked_folder_is_claimed_by_the_repository_that_made_it(tmp_path: Path) -> None:
    a = _repository(tmp_path / "a", "a")
    cp = plan_and_run(a, _plan(tmp_path, "a"))
    assert cp.returncode == 0, cp.stdout + cp.stderr
    folder = _root() / "repo"
    marker(folder).unlink(missing_ok=True)
    assert discover(a).worktrees_root() == folder
    assert owner_of(folder) == _common(a)


def test_a_folder_that_cannot_be_told_is_used_as_before(tmp_path: Path) -> None:
    root = tmp_path / "worktrees"
    (root / "repo" / ".drafts").mkdir(parents=True)  # something, but no checkout
    settings = Settings(worktree_root=root)
    for side in "ab":
        main = tmp_path / side / "repo"
        assert worktrees_for(settings, main, main / ".git") == root / "repo"
    assert not marker(root / "repo").exists()


def test_nothing_is_written_where_forge_refuses_the_root(repo: Path) -> None:
    inside = discover(repo, Settings(worktree_root=repo / "wt"))
    with pytest.raises(ForgeError, match="inside your working tree"):
        inside.worktrees_root()
    assert not (repo / "wt").exists()


def test_a_folder_of_merge_caches_only_is_claimed_by_the_first_to_come(tmp_path: Path) -> None:
    root = tmp_path / "worktrees"
    (root / "repo" / ".merge" / "0123.git").mkdir(parents=True)  # made again on demand
    settings = Settings(worktree_root=root)
    a, b = tmp_path / "a" / "repo", tmp_path / "b" / "repo"
    assert worktrees_for(settings, a, a / ".git") == root / "repo"
    assert owner_of(root / "repo") == (a / ".git").resolve()
    assert worktrees_for(settings, b, b / ".git") != root / "repo"
