"""objects: the cost of the object-store fingerprint forge takes when a run starts
and when it ends, on a repository with 10k loose objects and 50 packs (goal: under
50 ms). Stat data only; for context, hashing the same files' content is timed too.
"""

from __future__ import annotations

import hashlib
import subprocess
import zlib
from pathlib import Path

from kit import Context, Figure, git, median_of, ms

MAX_SECONDS = 0.05


def make_store(repo: Path, loose: int, packs: int) -> None:
    """`loose` loose blobs written as git writes them, and `packs` small packs."""
    git(repo.parent, "init", "-q", str(repo))
    store = repo / ".git" / "objects"
    for i in range(loose):
        body = f"blob {len(str(i)) + 1}\0{i}\n".encode()
        oid = hashlib.sha1(body).hexdigest()
        folder = store / oid[:2]
        folder.mkdir(exist_ok=True)
        (folder / oid[2:]).write_bytes(zlib.compress(body))
    for p in range(packs):
        blobs = "".join(f"pack {p} blob {j}\n" for j in range(20))
        paths = repo / f"p{p}"
        paths.mkdir()
        for j, line in enumerate(blobs.splitlines()):
            (paths / str(j)).write_text(line + "\n")
        names = "\n".join(str(paths / str(j)) for j in range(20))
        ids = git(repo, "hash-object", "-w", "--stdin-paths", input=names).split()
        subprocess.run(
            ["git", "pack-objects", "-q", ".git/objects/pack/pack"],
            cwd=repo,
            input="\n".join(ids) + "\n",
            capture_output=True,
            text=True,
            check=True,
        )


def hash_all(store: Path) -> int:
    n = 0
    for path in store.rglob("*"):
        if path.is_file():
            hashlib.sha256(path.read_bytes()).digest()
            n += 1
    return n


def _added_to_snapshot(repo: Path) -> float:
    """What the object store adds to forge's whole snapshot (refs, index, status): the
    snapshot timed as it is, and with the store's listing answering at once."""
    from unittest import mock

    from forge.git import objstore, snapshot
    from forge.git.repo import discover

    r = discover(repo)
    git(repo, "commit", "-q", "--allow-empty", "-m", "base")
    whole = median_of(lambda: snapshot.take(r), runs=7)
    with mock.patch.object(objstore, "fingerprint", lambda _store: {}):
        without = median_of(lambda: snapshot.take(r), runs=7)
    return max(0.0, whole - without)


def run(ctx: Context) -> list[Figure]:
    from forge.git import objstore

    loose = 2_000 if ctx.quick else 10_000
    packs = 10 if ctx.quick else 50
    repo = ctx.tmp("objects") / "repo"
    make_store(repo, loose, packs)
    store = repo / ".git" / "objects"
    files = len(objstore.fingerprint(store))
    took = median_of(lambda: objstore.fingerprint(store), runs=7)
    before = objstore.fingerprint(store)
    compare = median_of(lambda: objstore.changes(store, before, before), runs=7)
    content = median_of(lambda: hash_all(store), runs=3)
    added = _added_to_snapshot(repo)
    ctx.log(
        f"  {files} object files: fingerprint {ms(took)}, compare {ms(compare)}; "
        f"the whole snapshot forge takes costs {ms(added)} more with it"
    )
    return [
        Figure(
            bench="objects",
            config=f"object-store fingerprint, {loose} loose objects + {packs} packs",
            forge=ms(took),
            alternative=f"{ms(content)} (hashing every object file)",
            ratio=took / content,
            target=None,
            note=(
                "stat data (size, mtime_ns, inode) and each pack's trailer; listed while "
                f"the rest of the run's snapshot is taken, it adds {ms(added)} to it"
            ),
            seconds=took,
            max_seconds=MAX_SECONDS,
        )
    ]
