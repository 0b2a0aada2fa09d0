"""merge: 100 disjoint task branches merged into an integration branch with
forge.git.merge.merge_task (merge-tree, commit-tree, update-ref: no checkout), at
10k and 50k files. The per-merge cost must not grow with the repository.

For context, the same merges through a checkout (`git merge --no-ff` in a
worktree, what a hand-written script does) are timed on a sample of the branches.
"""

from __future__ import annotations

import statistics
import subprocess
import time
from pathlib import Path

import repogen
from kit import Context, Figure, git, ms, settle, stopwatch

TARGET = 1.3


def make_branches(repo: Path, prefix: str, indices: list[int]) -> list[str]:
    """One branch per index, each the base plus one edited file, in one fast-import."""
    base = git(repo, "rev-parse", "HEAD")
    chunks = []
    for n, i in enumerate(indices):
        content = f'"""Module {i}."""\n\nVALUE_{i} = {i}\n# changed by task {n}\n'.encode()
        msg = f"task {n}".encode()
        chunks.append(
            b"commit refs/heads/%s/t%03d\n" % (prefix.encode(), n)
            + b"committer Bench <bench@example.com> 1767225600 +0000\n"
            + b"data %d\n%s\n" % (len(msg), msg)
            + b"from %s\n" % base.encode()
            + b"M 100644 inline %s\n" % repogen.file_path(i).encode()
            + b"data %d\n%s\n" % (len(content), content)
        )
    subprocess.run(["git", "fast-import", "--quiet"], cwd=repo, input=b"".join(chunks), check=True)
    return [f"refs/heads/{prefix}/t{n:03d}" for n in range(len(indices))]


def forge_merges(repos: dict[int, tuple[Path, list[str]]]) -> dict[int, list[float]]:
    """Time merge_task for every branch, alternating between the repositories so
    that both sizes see the same background load (writeback, page cache)."""
    from forge.git.merge import merge_task
    from forge.git.repo import discover

    prepared = {}
    for files, (repo, branches) in repos.items():
        r = discover(repo)
        base = git(repo, "rev-parse", "HEAD")
        integ = f"refs/heads/mb{files}-integration"
        git(repo, "update-ref", integ, base)
        commits = [git(repo, "rev-parse", b) for b in branches]
        merge_task(r, ref=integ, task_commit=base, message="warm-up")  # identity lookup
        prepared[files] = (r, integ, commits)
    settle()
    times: dict[int, list[float]] = {files: [] for files in repos}
    count = min(len(c) for _, _, c in prepared.values())
    for i in range(count):
        for files, (r, integ, commits) in prepared.items():
            t0 = time.perf_counter()
            res = merge_task(r, ref=integ, task_commit=commits[i], message=f"merge {i}")
            times[files].append(time.perf_counter() - t0)
            if not res.merged or res.already:
                raise RuntimeError(f"merge of {commits[i]} did not land: {res}")
    return times


def checkout_merges(ctx: Context, repo: Path, branches: list[str], tag: str) -> list[float]:
    wt = ctx.tmp(f"merge-checkout-{tag}") / "wt"
    git(repo, "worktree", "add", "-q", "-b", f"bench-checkout-{tag}", str(wt), "HEAD")
    times = []
    for b in branches:
        with stopwatch() as t:
            git(wt, "merge", "-q", "--no-ff", "--no-edit", "--no-verify", b)
        times.append(t[0])
    return times


def run(ctx: Context) -> list[Figure]:
    sizes = [1000, 10_000] if ctx.quick else [10_000, 50_000]
    count = 30 if ctx.quick else 100
    sample = 10 if ctx.quick else 20
    repos = {}
    for files in sizes:
        repo = repogen.repo(ctx, files)
        stride = files // count
        branches = make_branches(repo, f"mb{files}", [n * stride + 3 for n in range(count)])
        repos[files] = (repo, branches)
    plumbing = forge_merges(repos)
    checkout: dict[int, list[float]] = {}
    for files, (repo, branches) in repos.items():
        settle()
        checkout[files] = checkout_merges(ctx, repo, branches[:sample], str(files))
        ctx.log(
            f"  {files} files: merge_task mean {ms(statistics.mean(plumbing[files]))} "
            f"(median {ms(statistics.median(plumbing[files]))}, max {ms(max(plumbing[files]))}); "
            f"checkout merge mean {ms(statistics.mean(checkout[files]))}"
        )
    small, big = sizes
    f_small, f_big = statistics.mean(plumbing[small]), statistics.mean(plumbing[big])
    c_small, c_big = statistics.mean(checkout[small]), statistics.mean(checkout[big])
    label = f"{big // 1000}k vs {small // 1000}k files"
    return [
        Figure(
            bench="merge",
            config=f"{count} merges, {label}",
            forge=f"{ms(f_big)} vs {ms(f_small)}",
            alternative="growth of the per-merge cost",
            ratio=f_big / f_small,
            target=TARGET,
            note=(
                f"merge through a checkout (`git merge --no-ff`, {sample} merges): "
                f"{ms(c_big)} vs {ms(c_small)} (growth {c_big / c_small:.2f}); "
                f"forge's plumbing merge is {c_big / f_big:.0f}x cheaper at {big // 1000}k"
            ),
        ),
        Figure(
            bench="merge",
            config=f"per merge at {big // 1000}k files",
            forge=ms(f_big),
            alternative=f"{ms(c_big)} (git merge --no-ff in a checkout)",
            ratio=f_big / c_big,
            target=None,
        ),
    ]
