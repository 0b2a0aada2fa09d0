"""GitHub (and GitHub Enterprise) as a `CodeHost`, through githubkit.

githubkit is imported here only, and this module only when `forge pr` runs (the
`host` extra). Replies are read as JSON into forge's own records at this edge:
forge needs a handful of fields, and a reply a schema would refuse for a field
forge never reads must not stop a hand-off. Every failure is one line: the host
down or slow (exit 8), a rate limit waited out up to `[host] wait` when the host
gives a reset time (then exit 8), a refusal (401, 403, 404, 422: exit 2)."""

from __future__ import annotations

import ssl
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Literal, Protocol, TypeVar

from forge.errors import ForgeError
from forge.host.api import (
    Check,
    CheckState,
    HostDown,
    NewPull,
    PrState,
    PullRequest,
    RateLimited,
    Repo,
    ReviewComment,
)
from forge.host.auth import Token
from forge.host.target import HostTarget
from forge.plan.cluster_table import HostTable

if TYPE_CHECKING:
    from githubkit import GitHub, TokenAuthStrategy


class _Reply(Protocol):
    """A githubkit response, read as plain JSON."""

    def json(self) -> object: ...


T = TypeVar("T")
_METHODS = {"merge": "MERGE", "squash": "SQUASH", "rebase": "REBASE"}
_REST_METHODS: dict[str, Literal["merge", "squash", "rebase"]] = {
    "merge": "merge",
    "squash": "squash",
    "rebase": "rebase",
}
_AUTO_MERGE = """mutation PullRequestAutoMerge($id: ID!, $method: PullRequestMergeMethod) {
  enablePullRequestAutoMerge(input: {pullRequestId: $id, mergeMethod: $method}) {
    clientMutationId
  }
}"""


def connect(target: HostTarget, token: Token, table: HostTable) -> GitHubHost:
    try:
        from githubkit import GitHub
    except ImportError:
        raise ForgeError("`forge pr` needs the host extra: pip install 'forge[host]'") from None
    # The system's trust store, as Python's ssl reads it (SSL_CERT_FILE included).
    client = GitHub(
        token.value,
        base_url=target.api + "/",
        timeout=table.timeout,
        ssl_verify=ssl.create_default_context(),
        auto_retry=False,
        http_cache=False,
        user_agent="forge",
    )
    return GitHubHost(client, target, table)


class GitHubHost:
    def __init__(
        self, client: GitHub[TokenAuthStrategy], target: HostTarget, table: HostTable
    ) -> None:
        self._gh = client
        self._target = target
        self._table = table
        self._stop = threading.Event()  # never set: a rate limit's wait is interruptible

    # --- the calls -----------------------------------------------------------------

    def repository(self) -> Repo:
        t = self._target
        data = self._json("read the repository", lambda: self._gh.rest.repos.get(t.owner, t.name))
        if not isinstance(data, dict):
            raise ForgeError(f"{t.host} answered with something that is not a repository")
        rights = data.get("permissions")
        can_push = bool(rights.get("push")) if isinstance(rights, dict) else True
        return Repo(default_branch=str(data.get("default_branch") or "main"), can_push=can_push)

    def find_pull(self, branch: str) -> PullRequest | None:
        t = self._target
        found = self._json(
            "list pull requests",
            lambda: self._gh.rest.pulls.list(
                t.owner, t.name, head=f"{t.owner}:{branch}", state="open"
            ),
        )
        return _pull(found[0]) if isinstance(found, list) and found else None

    def pull(self, number: int) -> PullRequest:
        t = self._target
        return _pull(
            self._json(
                f"read pull request #{number}",
                lambda: self._gh.rest.pulls.get(t.owner, t.name, number),
            )
        )

    def open_pull(self, new: NewPull) -> PullRequest:
        t = self._target
        return _pull(
            self._json(
                "open a pull request",
                lambda: self._gh.rest.pulls.create(
                    t.owner,
                    t.name,
                    title=new.title,
                    head=new.head,
                    base=new.base,
                    body=new.body,
                    draft=new.draft,
                ),
            )
        )

    def update_pull(self, number: int, new: NewPull) -> PullRequest:
        t = self._target
        return _pull(
            self._json(
                f"update pull request #{number}",
                lambda: self._gh.rest.pulls.update(
                    t.owner, t.name, number, title=new.title, body=new.body, base=new.base
                ),
            )
        )

    def checks(self, sha: str) -> list[Check]:
        t = self._target
        data = self._json(
            "read the checks",
            lambda: self._gh.rest.checks.list_for_ref(t.owner, t.name, sha, per_page=100),
        )
        runs = data.get("check_runs") if isinstance(data, dict) else None
        return [_check(run) for run in runs or [] if isinstance(run, dict)]

    def review_decision(self, number: int) -> str | None:
        """APPROVED or CHANGES_REQUESTED by each reviewer's last word (None: none yet)."""
        last: dict[str, str] = {}
        for review in self._reviews(number):
            state = str(review.get("state") or "")
            if state in ("APPROVED", "CHANGES_REQUESTED", "DISMISSED"):
                last[_login(review)] = state
        said = set(last.values())
        if "CHANGES_REQUESTED" in said:
            return "CHANGES_REQUESTED"
        return "APPROVED" if "APPROVED" in said else None

    def review_comments(self, number: int) -> list[ReviewComment]:
        t = self._target
        out = [
            ReviewComment(_login(r), str(r.get("body") or ""))
            for r in self._reviews(number)
            if r.get("state") == "CHANGES_REQUESTED" and r.get("body")
        ]
        lines = self._json(
            "read the review comments",
            lambda: self._gh.rest.pulls.list_review_comments(t.owner, t.name, number, per_page=100),
        )
        for c in lines if isinstance(lines, list) else []:
            line = c.get("line") or c.get("original_line")
            out.append(
                ReviewComment(
                    _login(c),
                    str(c.get("body") or ""),
                    path=str(c.get("path") or "") or None,
                    line=line if isinstance(line, int) else None,
                )
            )
        return out

    def comment(self, number: int, body: str) -> None:
        t = self._target
        self._json(
            "comment on the pull request",
            lambda: self._gh.rest.issues.create_comment(t.owner, t.name, number, body=body),
        )

    def auto_merge(self, pull: PullRequest, method: str | None) -> None:
        variables: dict[str, object] = {"id": pull.node_id}
        if method:
            variables["method"] = _METHODS[method]
        self._call("ask for auto-merge", lambda: self._gh.graphql.request(_AUTO_MERGE, variables))

    def merge(self, pull: PullRequest, method: str | None) -> None:
        t = self._target
        how = _REST_METHODS.get(method or "")
        self._json(
            f"merge pull request #{pull.number}",
            lambda: self._gh.rest.pulls.merge(
                t.owner, t.name, pull.number, sha=pull.head_sha, merge_method=how
            ),
        )

    # --- one call, its faults ----------------------------------------------------------

    def _reviews(self, number: int) -> list[dict[str, object]]:
        t = self._target
        data = self._json(
            "read the reviews",
            lambda: self._gh.rest.pulls.list_reviews(t.owner, t.name, number, per_page=100),
        )
        return [r for r in data if isinstance(r, dict)] if isinstance(data, list) else []

    def _json(self, what: str, call: Callable[[], _Reply]) -> object:
        """The reply's JSON, narrowed by the readers (`_pull`, `_check`)."""
        response = self._call(what, call)
        return response.json()

    def _call(self, what: str, call: Callable[[], T]) -> T:
        from githubkit.exception import (
            GraphQLFailed,
            RateLimitExceeded,
            RequestFailed,
            RequestTimeout,
        )
        from githubkit.exception import RequestError as Unreached

        host = self._target.host
        while True:
            try:
                return call()
            except RateLimitExceeded as exc:
                wait = exc.retry_after.total_seconds()
                if wait > self._table.wait:
                    raise RateLimited(
                        f"{host} rate-limited forge ({what}) for {wait:.0f}s more, past "
                        f"[host] wait = {self._table.wait:.0f}s: run `forge pr` again later"
                    ) from None
                self._stop.wait(wait + 0.5)  # sleep-ok: the host named when the limit ends
            except RequestFailed as exc:
                raise _refused(what, host, exc.response.status_code, _message(exc)) from None
            except RequestTimeout:
                raise HostDown(
                    f"{host} did not answer within {self._table.timeout:g}s ({what}): "
                    "nothing was changed by this call; run `forge pr` again"
                ) from None
            except GraphQLFailed as exc:
                raise ForgeError(f"{host} refused to {what}: {exc}") from None
            except Unreached as exc:
                raise HostDown(f"cannot reach {host} ({what}): {_cause(exc)}") from None


def _refused(what: str, host: str, status: int, message: str) -> ForgeError:
    if status == 401:
        return ForgeError(f"{host} refused the token ({status}: {message}): log in again")
    if status == 403:
        return ForgeError(
            f"the token lacks the rights to {what} on {host} ({status}: {message}); a "
            "fine-grained token needs Contents, Pull requests and Checks"
        )
    if status == 404:
        return ForgeError(f"{host}: cannot {what}: not found, or the token cannot see it")
    if status >= 500:
        return HostDown(f"{host} failed to {what} ({status}: {message}): try again later")
    return ForgeError(f"{host} refused to {what} ({status}: {message})")


def _message(exc: Exception) -> str:
    response = getattr(exc, "response", None)
    try:
        data = response.json() if response is not None else None
    except ValueError:
        data = None
    if isinstance(data, dict):
        errors = data.get("errors")
        first = errors[0] if isinstance(errors, list) and errors else None
        detail = first.get("message") if isinstance(first, dict) else None
        return str(detail or data.get("message") or "no message")
    return "no message"


def _cause(exc: BaseException) -> str:
    inner = exc.__cause__ or exc.__context__ or exc
    return str(inner).strip().splitlines()[0] if str(inner).strip() else type(inner).__name__


def _login(item: dict[str, object]) -> str:
    user = item.get("user")
    return str(user.get("login") or "someone") if isinstance(user, dict) else "someone"


def _pull(data: object) -> PullRequest:
    if not isinstance(data, dict):
        raise ForgeError("the host answered with something that is not a pull request")
    head, base = data.get("head"), data.get("base")
    merged = bool(data.get("merged")) or bool(data.get("merged_at"))
    state = PrState.MERGED if merged else PrState(str(data.get("state") or "open"))
    mergeable = data.get("mergeable_state")
    return PullRequest(
        number=int(data["number"]),
        url=str(data.get("html_url") or ""),
        node_id=str(data.get("node_id") or ""),
        state=state,
        head_sha=str(head.get("sha") or "") if isinstance(head, dict) else "",
        base=str(base.get("ref") or "") if isinstance(base, dict) else "",
        draft=bool(data.get("draft")),
        base_sha=str(base.get("sha") or "") if isinstance(base, dict) else "",
        mergeable=str(mergeable) if mergeable else None,
        merge_commit=str(data["merge_commit_sha"])
        if merged and data.get("merge_commit_sha")
        else None,
    )


def _check(run: dict[str, object]) -> Check:
    status, conclusion = run.get("status"), run.get("conclusion")
    if status != "completed":
        state = CheckState.PENDING
    elif conclusion == "success":
        state = CheckState.PASSED
    elif conclusion in ("neutral", "skipped"):
        state = CheckState.SKIPPED
    else:  # failure, cancelled, timed_out, action_required, stale
        state = CheckState.FAILED
    output = run.get("output")
    summary = ""
    if isinstance(output, dict):
        summary = str(output.get("title") or output.get("summary") or "")
    return Check(
        name=str(run.get("name") or "check"),
        state=state,
        summary=summary.strip().splitlines()[0] if summary.strip() else "",
        url=str(run.get("html_url") or run.get("details_url") or ""),
    )
