"""What forge writes into its commits and reads back: a subject a person reads (the
task's title) and forge's own facts as git trailers (`Forge-Plan: p`), the form
`git log --format=%(trailers)` and `git interpret-trailers` understand.

Commits written before trailers carried the facts in their subject
(`forge: merge p/t (attempt 2)`, `forge: p/t attempt 2`): `facts` still reads them.
"""

from __future__ import annotations

import re

from forge.frozen import frozen

PLAN = "Forge-Plan"
TASK = "Forge-Task"
ATTEMPT = "Forge-Attempt"
CANDIDATE = "Forge-Candidate"
PROMPT = "Forge-Prompt"
VERIFIED = "Forge-Verification"
INTEGRATION = "Forge-Integration"

_TRAILER = re.compile(r"^([A-Za-z0-9-]+):\s*(.*)$")
_OLD_MERGE = re.compile(
    r"^forge: merge (?P<plan>[^/\s]+)/(?P<task>\S+) \((?:attempt )?(?P<n>[^)]*)\)"
)
_OLD_ATTEMPT = re.compile(r"^forge: (?P<plan>[^/\s]+)/(?P<task>\S+) attempt (?P<n>\d+)$")
SUBJECT_MAX = 72


@frozen
class Facts:
    """What a commit of forge's says it is."""

    plan: str
    task: str
    attempt: int | None = None


def subject(title: str, fallback: str) -> str:
    """One line a person reads in `git log --oneline`: the title, cut at 72."""
    line = " ".join(title.split()) or fallback
    return line if len(line) <= SUBJECT_MAX else line[: SUBJECT_MAX - 1] + "…"


def compose(title: str, trailers: list[tuple[str, str]], *, body: str = "") -> str:
    """A commit message: subject, an optional body, then the trailers."""
    parts = [title]
    if body.strip():
        parts.append(body.strip())
    parts.append("\n".join(f"{k}: {' '.join(v.split())}" for k, v in trailers))
    return "\n\n".join(parts) + "\n"


def task_message(
    title: str, *, plan: str, task: str, attempt: int, candidate: str | None = None
) -> str:
    """The message of a task's attempt commit and of the merge that lands it."""
    trailers = [(PLAN, plan), (TASK, task), (ATTEMPT, str(attempt))]
    if candidate is not None:
        trailers.append((CANDIDATE, candidate))
    return compose(subject(title, task), trailers)


def read(message: str) -> dict[str, list[str]]:
    """The trailers of `message` (its last paragraph, when every line there is one)."""
    paragraphs = [p for p in message.strip().split("\n\n") if p.strip()]
    if len(paragraphs) < 2:
        return {}
    found: dict[str, list[str]] = {}
    for line in paragraphs[-1].splitlines():
        m = _TRAILER.match(line.strip())
        if m is None:
            return {}
        found.setdefault(m.group(1), []).append(m.group(2).strip())
    return found


def facts(message: str) -> Facts | None:
    """The plan, task and attempt a commit of forge's is about (None: not one)."""
    found = read(message)
    if found.get(PLAN) and found.get(TASK):
        n = (found.get(ATTEMPT) or [""])[0]
        return Facts(found[PLAN][0], found[TASK][0], int(n) if n.isdigit() else None)
    first = message.split("\n", 1)[0].strip()
    for old in (_OLD_MERGE, _OLD_ATTEMPT):
        m = old.match(first)
        if m is not None:
            n = m.group("n")
            return Facts(m.group("plan"), m.group("task"), int(n) if n.isdigit() else None)
    return None


def with_body(message: str, text: str) -> str:
    """`message` with `text` as a paragraph before its trailers."""
    head, sep, last = message.rstrip("\n").rpartition("\n\n")
    if not sep or not read(message):
        return message.rstrip("\n") + f"\n\n{text}\n"
    return f"{head}\n\n{text}\n\n{last}\n"


def tasks_phrase(tasks: list[str]) -> str:
    """`task a`, or `tasks a, b` (four at most): how a reason names other tasks."""
    return f"task {tasks[0]}" if len(tasks) == 1 else "tasks " + ", ".join(tasks[:4])


def merge_message(plan: str, task: str, attempt: int, title: str) -> str:
    """The message of the merge commit that lands a task's attempt."""
    return task_message(title, plan=plan, task=task, attempt=attempt)
