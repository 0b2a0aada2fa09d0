"""Objects the user's store has only through an alternate are not the user's.

git writes no object it can already read: with an entry in the user's
`objects/info/alternates` naming a slot's own `.git/objects` (a task without the
sandbox can append one), every object the task wrote there counts as present,
forge's `add`, `write-tree` and checking fetch copy none of them, and the
integration branch loses them with the slot (`git fsck`: missing; `forge accept`
fails). So when the user's store borrows from anywhere, the objects of a task's
work are checked in the user's own files (loose folders and packs, no alternate)
and those found only elsewhere are copied in as a pack of real objects.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

from forge.errors import ForgeError
from forge.git import taskgit
from forge.git.contained import HARDENED, NO_HOOKS
from forge.git.repo import Repository


def _git(repo: Repository, *args: str, data: bytes, objects: Path | None = None) -> bytes:
    env = {**os.environ, **HARDENED, "GIT_DIR": str(repo.common_dir)}
    if objects is not None:
        env["GIT_OBJECT_DIRECTORY"] = str(objects)
    cp = subprocess.run(
        ["git", *NO_HOOKS, *args],
        cwd=repo.common_dir,
        env=env,
        input=data,
        capture_output=True,
        check=False,
    )
    if cp.returncode != 0:
        why = cp.stderr.decode("utf-8", "replace").strip().splitlines()
        raise ForgeError(f"git {args[0]}: {why[-1] if why else f'exit {cp.returncode}'}")
    return cp.stdout


def make_real(repo: Repository, tips: Sequence[str], *, since: Sequence[str]) -> int:
    """Copy into the user's own store every object reachable from `tips` and not from
    `since` that it reads only through an alternate. Returns how many were copied
    (nothing is looked at when the user's store borrows from nowhere)."""
    objects = repo.common_dir / "objects"
    listed = taskgit.read_file(objects / "info" / "alternates") or b""
    if not listed.strip():
        return 0
    wanted = _git(
        repo,
        "rev-list",
        "--objects",
        "--no-object-names",
        "--stdin",
        data="".join(f"{t}\n" for t in tips).encode() + "".join(f"^{s}\n" for s in since).encode(),
    )
    if not wanted.strip():
        return 0
    with tempfile.TemporaryDirectory(prefix="forge-own-objects-") as tmp:
        own = Path(tmp)  # the user's own object files, and no alternate
        for name in os.listdir(objects):
            if name != "info":
                os.symlink(objects / name, own / name)
        found = _git(
            repo,
            "cat-file",
            "--batch-check=%(objectname)",
            data=wanted,
            objects=own,
        )
    missing = [ln.split()[0] for ln in found.decode().splitlines() if ln.endswith(" missing")]
    if not missing:
        return 0
    pack = _git(repo, "pack-objects", "--stdout", "-q", data="\n".join([*missing, ""]).encode())
    _git(repo, "index-pack", "--stdin", data=pack)
    return len(missing)
