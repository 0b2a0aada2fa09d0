"""hermetic: what a lane run costs forge in its checkout (prepare it, a fingerprint
before and after the run), now that the checkout is scrubbed to the judged commit
plus setup's products (index flags cleared, every other untracked or ignored path
removed) and the fingerprint also reads the index flags, against the reset it
replaced (`checkout --force`, `reset --hard`, `clean -ffd`, `git status`).

Both checkouts move between two commits each round, hold a setup product (a
`.venv` of 2,000 files, which survives) and get the caches a test run leaves
(`__pycache__` folders, ignored) before each timed round.
"""

from __future__ import annotations

import statistics
from pathlib import Path

import repogen
from kit import Context, Figure, git, ms, settle, stopwatch

TARGET = 1.5
VENV_FILES = 2000
CACHES = 50


def _venv(path: Path) -> None:
    for i in range(VENV_FILES):
        f = path / ".venv" / "lib" / f"pkg{i // 100:02d}" / f"m{i:04d}.py"
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text("x = 1\n")


def _caches(path: Path, round_no: int) -> None:
    """What a test run leaves: bytecode next to the sources, all ignored."""
    for i in range(CACHES):
        src = path / repogen.file_path(i * 7)
        cache = src.parent / "__pycache__" / f"{src.stem}.r{round_no}.pyc"
        cache.parent.mkdir(exist_ok=True)
        cache.write_bytes(b"\0" * 256)


def run(ctx: Context) -> list[Figure]:
    from forge.git.repo import discover
    from forge.verify.checkout import prepare

    files = 2000 if ctx.quick else 10_000
    rounds = 20 if ctx.quick else 40
    repo = repogen.repo(ctx, files)
    (repo / ".gitignore").write_text("__pycache__/\n.venv/\n")
    git(repo, "commit", "-q", "--no-verify", "-am", "ignore .venv")
    first = git(repo, "rev-parse", "HEAD")
    (repo / repogen.file_path(1)).write_text('"""Changed."""\n')
    git(repo, "commit", "-q", "--no-verify", "-am", "one change")
    second = git(repo, "rev-parse", "HEAD")
    commits = [first, second]
    r = discover(repo)
    new = prepare(r, key="bench-hermetic", lane="new", commit=first, setup="bench")
    old = prepare(r, key="bench-hermetic", lane="old", commit=first)
    for co in (new, old):
        _venv(co.path)
    new.record_products()

    def hermetic(commit: str) -> None:
        prepare(r, key="bench-hermetic", lane="new", commit=commit, setup="bench")
        new.fingerprint()  # before the run
        new.fingerprint()  # after it

    def old_fingerprint() -> None:
        old.git("rev-parse", "--verify", "--quiet", "HEAD")
        old.git("status", "--porcelain=v1", "-z", "--untracked-files=all", "--no-renames")

    def reset(commit: str) -> None:
        old_fingerprint()  # prepare: changes forge did not make?
        old.git("checkout", "--quiet", "--force", "--detach", commit)
        old.git("reset", "--quiet", "--hard", commit)
        old.git("clean", "-ffdq")
        old_fingerprint()
        old_fingerprint()

    times: dict[str, list[float]] = {"hermetic": [], "reset": []}
    for n in range(rounds):
        commit = commits[n % 2]
        pair = [("hermetic", hermetic, new), ("reset", reset, old)]
        for name, fn, co in pair if n % 2 else pair[::-1]:  # neither always goes first
            _caches(co.path, n)
            settle()
            with stopwatch() as t:
                fn(commit)
            times[name].append(t[0])
    if not (new.path / ".venv" / "lib").is_dir():
        raise RuntimeError("the setup's products did not survive the scrub")
    if any(new.path.glob("src/**/__pycache__")):
        raise RuntimeError("the scrub left ignored caches behind")
    h, o = statistics.median(times["hermetic"]), statistics.median(times["reset"])
    ctx.log(f"  {files} files, {rounds} rounds: hermetic median {ms(h)}, reset median {ms(o)}")
    return [
        Figure(
            bench="hermetic",
            config=f"checkout work of a lane run, {files} files + a {VENV_FILES}-file .venv",
            forge=ms(h),
            alternative=f"{ms(o)} (checkout, reset --hard, clean -ffd; status x2)",
            ratio=h / o,
            target=TARGET,
            note="setup's .venv survives; ignored caches and index flags do not",
        )
    ]
