"""What forge asks of a code host, whatever host it is: a small interface
(`CodeHost`) and the typed records its answers are read into, once, at its edge.

GitHub is the one host today (`forge/host/github.py`); another (GitLab's merge
requests) implements the same calls."""

from __future__ import annotations

from enum import StrEnum
from typing import Protocol

from forge.errors import ExitCode, ForgeError
from forge.frozen import frozen


class HostDown(ForgeError):
    """The host did not answer, or not in time: nothing forge did is half done."""

    code = ExitCode.PAUSED


class RateLimited(ForgeError):
    """The host asked forge to wait longer than `[host] wait` allows."""

    code = ExitCode.PAUSED


class PrState(StrEnum):
    OPEN = "open"
    CLOSED = "closed"  # closed without a merge (by a person)
    MERGED = "merged"


class CheckState(StrEnum):
    PENDING = "pending"  # queued or running: decides nothing yet
    PASSED = "passed"
    FAILED = "failed"
    SKIPPED = "skipped"  # neutral or skipped: decides nothing


@frozen
class Repo:
    default_branch: str
    can_push: bool  # the token may push and open pull requests


@frozen
class PullRequest:
    number: int
    url: str  # the page a person opens
    node_id: str  # the host's global id (auto-merge is asked through it)
    state: PrState
    head_sha: str
    base: str
    draft: bool
    base_sha: str = ""  # the base's commit the host's checks merged the head with
    mergeable: str | None = None  # "clean", "dirty" (a conflict on the base), ... (None: unknown)
    merge_commit: str | None = None  # the commit the merge made on the base


@frozen
class Check:
    name: str
    state: CheckState
    summary: str = ""
    url: str = ""


@frozen
class ReviewComment:
    author: str
    body: str
    path: str | None = None  # a comment on a line of a file; None: the review's body
    line: int | None = None


@frozen
class NewPull:
    """What a pull request is opened or updated with."""

    title: str
    body: str
    head: str  # the branch forge pushed
    base: str
    draft: bool = False


class CodeHost(Protocol):
    """The calls `forge pr` makes; each raises ForgeError (HostDown, RateLimited, or
    a refusal: exit 2) with one line a person can act on."""

    def repository(self) -> Repo: ...

    def find_pull(self, branch: str) -> PullRequest | None: ...

    def pull(self, number: int) -> PullRequest: ...

    def open_pull(self, new: NewPull) -> PullRequest: ...

    def update_pull(self, number: int, new: NewPull) -> PullRequest: ...

    def checks(self, sha: str) -> list[Check]: ...

    def review_decision(self, number: int) -> str | None: ...

    def review_comments(self, number: int) -> list[ReviewComment]: ...

    def comment(self, number: int, body: str) -> None: ...

    def auto_merge(self, pull: PullRequest, method: str | None) -> None: ...

    def merge(self, pull: PullRequest, method: str | None) -> None: ...
