"""The user's object store is part of the fingerprint, through the real CLI: an
existing object rewritten or removed during a run is named in the summary and in
`forge status`, and `forge accept` refuses until a run measures it unchanged. git's
own freshening of an object it already has is no change."""

from __future__ import annotations

import os
import subprocess
import zlib
from pathlib import Path

from helpers.gitkit import commit_all, git, run_forge
from helpers.runkit import plan_and_run, write_plan

from forge.git import objstore


def _plan(tmp_path: Path, run: str) -> Path:
    return write_plan(
        tmp_path, f'verify = "true"\n[[task]]\nid = "a"\nfiles = ["a.txt"]\nrun = """{run}"""\n'
    )


def test_a_rewritten_loose_object_is_named_and_blocks_accept(repo: Path, tmp_path: Path) -> None:
    oid = git(repo, "rev-parse", "HEAD:README.md")
    obj = repo / ".git" / "objects" / oid[:2] / oid[2:]
    assert obj.is_file()
    good = obj.read_bytes()
    # Same object, a different file: still named (a task has no business there).
    run = f"chmod u+w {obj}; printf 'not an object' > {obj}; echo a > a.txt"
    cp = plan_and_run(repo, _plan(tmp_path, run))
    assert cp.returncode == 0, cp.stdout + cp.stderr
    line = f"object store changed: 1 object rewritten ({oid[:12]}...)"
    assert line in cp.stdout, cp.stdout
    assert "were not touched" not in cp.stdout
    assert line in run_forge(repo, "status").stdout
    before = git(repo, "rev-parse", "main")
    acc = run_forge(repo, "accept")
    assert acc.returncode == 2, acc.stdout + acc.stderr
    assert acc.stderr.count("\n") == 1 and "git fsck" in acc.stderr, acc.stderr
    assert git(repo, "rev-parse", "main") == before
    obj.chmod(0o644)
    obj.write_bytes(good)  # what `git fsck` would send one to put right
    again = run_forge(repo, "run")
    assert again.returncode == 0 and "were not touched" in again.stdout, again.stdout
    assert run_forge(repo, "accept").returncode == 0
    assert git(repo, "rev-parse", "main") != before


def test_a_removed_pack_is_named(repo: Path, tmp_path: Path) -> None:
    git(repo, "repack", "-q", "-a", "-d")
    # A second pack holding one object the first has too: removing it breaks nothing.
    blob = git(repo, "rev-parse", "HEAD:README.md")
    name = subprocess.run(
        ["git", "pack-objects", "-q", ".git/objects/pack/pack"],
        cwd=repo,
        input=blob + "\n",
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    run = f"rm -f {repo}/.git/objects/pack/pack-{name}.*; echo a > a.txt"
    cp = plan_and_run(repo, _plan(tmp_path, run))
    assert cp.returncode == 0, cp.stdout + cp.stderr
    # Nothing is lost (the other pack has its object): a repack, not a change.
    line = (
        "object store repacked (git gc or git repack): 2 pack files gone, every object still there"
    )
    assert line in cp.stdout, cp.stdout
    assert run_forge(repo, "accept").returncode == 0


def test_gits_own_freshening_is_no_change(repo: Path, tmp_path: Path) -> None:
    """The task writes files whose blobs are already in a pack and loose: git
    freshens both when forge commits them, which the fingerprint sees through."""
    (repo / "b.txt").write_text("already here\n")
    commit_all(repo, "b")
    git(repo, "repack", "-q", "-d")  # b's blob in a pack
    (repo / "c.txt").write_text("loose too\n")
    commit_all(repo, "c")  # c's blob loose
    store = repo / ".git" / "objects"
    old = 1_000_000_000
    for name in objstore.fingerprint(store):  # made old: a freshen moves the mtime
        os.utime(store / name, ns=(old, old))
    run = f"cp {repo}/b.txt b2.txt; cp {repo}/c.txt c2.txt"
    plan = write_plan(
        tmp_path, f'verify = "true"\n[[task]]\nid = "a"\nfiles = ["*.txt"]\nrun = "{run}"\n'
    )
    cp = plan_and_run(repo, plan)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    after = objstore.fingerprint(store)
    c_blob = git(repo, "rev-parse", "HEAD:c.txt")
    assert after[f"{c_blob[:2]}/{c_blob[2:]}"][1] != old, "git freshened the loose blob"
    assert any(n.endswith(".pack") and e[1] != old for n, e in after.items())
    assert "object store changed" not in cp.stdout
    assert "were not touched" in cp.stdout, cp.stdout


def test_freshened_files_are_recognised(tmp_path: Path) -> None:
    """The check itself: mtime moved, content the same -> no change; content
    changed in place -> rewritten."""
    store = tmp_path / "objects"
    (store / "ab").mkdir(parents=True)
    body = b"blob 3\0hi\n"
    import hashlib

    oid = hashlib.sha1(body).hexdigest()
    (store / oid[:2]).mkdir(exist_ok=True)
    obj = store / oid[:2] / oid[2:]
    obj.write_bytes(zlib.compress(body))
    before = objstore.fingerprint(store)
    os.utime(obj, ns=(5, 5))
    assert objstore.changes(store, before, objstore.fingerprint(store)) == []
    with obj.open("r+b") as fh:  # same size, same inode, other content
        data = bytearray(zlib.compress(body))
        fh.write(bytes(data[:-1]) + bytes([data[-1] ^ 1]))
    os.utime(obj, ns=(7, 7))
    got = objstore.changes(store, before, objstore.fingerprint(store))
    assert got == [f"object store changed: 1 object rewritten ({oid[:12]}...)"]
