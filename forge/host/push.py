"""Pushing a verified head to the remote's branch, leased on what forge last pushed
there: a branch someone else moved is never overwritten."""

from __future__ import annotations

from collections.abc import Mapping

from forge.base import proc
from forge.errors import ForgeError
from forge.git.repo import Repository, short_sha


def remote_url(repo: Repository, remote: str) -> str:
    cp = repo.try_git("remote", "get-url", remote)
    if cp.returncode != 0:
        known = repo.git("remote").split()
        have = f" (this repository has: {', '.join(known)})" if known else " (it has none)"
        raise ForgeError(
            f"no remote named '{remote}'{have}: `git remote add {remote} URL`, or --remote NAME"
        )
    return cp.stdout.strip()


def remote_head(repo: Repository, remote: str, branch: str, env: Mapping[str, str]) -> str | None:
    """The commit `branch` is at on the remote (None: no such branch)."""
    cp = proc.run(
        ["git", "ls-remote", "--heads", remote, f"refs/heads/{branch}"],
        cwd=repo.root,
        env=env,
        check=False,
    )
    if cp.returncode != 0:
        raise ForgeError(f"cannot read remote '{remote}': {_last(cp.stderr)}")
    for line in cp.stdout.splitlines():
        sha, _, ref = line.partition("\t")
        if ref == f"refs/heads/{branch}":
            return sha
    return None


def push_leased(
    repo: Repository, remote: str, what: tuple[str, str], lease: str | None, env: Mapping[str, str]
) -> None:
    """Push commit `what[0]` to branch `what[1]` of `remote`, only if the branch is
    still at `lease` (None: only if it does not exist)."""
    sha, branch = what
    ref = f"refs/heads/{branch}"
    cp = proc.run(
        [
            "git",
            "push",
            "--porcelain",
            f"--force-with-lease={ref}:{lease or ''}",
            remote,
            f"{sha}:{ref}",
        ],
        cwd=repo.root,
        env=env,
        check=False,
    )
    if cp.returncode == 0:
        return
    said = cp.stdout + cp.stderr
    if "stale info" in said or "fetch first" in said or "already exists" in said:
        raise ForgeError(
            f"branch {branch} on '{remote}' is not where forge left it "
            f"({short_sha(lease) if lease else 'absent'}): someone else pushed to it; forge "
            "does not overwrite it (push the plan to another branch, or delete that one)"
        )
    if "protected branch" in said or "GH006" in said or "declined" in said:
        raise ForgeError(f"'{remote}' refused the push to {branch}: {_refusal(said)}")
    raise ForgeError(f"the push to {branch} on '{remote}' failed: {_last(said)}")


def _refusal(text: str) -> str:
    """What the remote said (its `remote:` lines), else git's last line."""
    said = [line.removeprefix("remote:").strip() for line in text.splitlines()]
    theirs = [line for line in said if "GH006" in line or "protected" in line.lower()]
    return theirs[0] if theirs else _last(text)


def _last(text: str) -> str:
    lines = [
        line.strip()
        for line in text.splitlines()
        if line.strip() and not line.startswith(("To ", "Done"))
    ]
    return lines[-1] if lines else "(no output)"
