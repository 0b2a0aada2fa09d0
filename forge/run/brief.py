"""The planner's prompt (`forge draft`): the goal, the repository's tracked files, the
plan format (every key the plan checker accepts, read from its own tables), the
agents at hand, where to answer and, on a try after the first, the problems of the
last answer, one line each as `forge plan --check` prints them."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence

from forge.frozen import frozen
from forge.plan.load import PLAN_KEYS, TASK_KEYS

MAX_LISTED = 300  # tracked paths listed one by one; more are counted per folder

# What each key of the checker's tables means to a planner. A key the checker gains
# without a line here is still listed (tests/plan/test_brief.py asks for a line).
KEY_HELP: dict[str, str] = {
    "name": "the plan's name (default: the file's stem)",
    "base": "the commit or branch the tasks start from (default: HEAD)",
    "max_parallel": "tasks at once (default 2)",
    "setup": "a command run once in every worktree before its task",
    "setup_timeout": "the setup's time limit",
    "env": "environment for every command, a table of strings",
    "verify": "the command (or [verify.lanes]) that verifies the merged work",
    "verify_reruns": "reruns of a failing verification (flake check)",
    "gate": "how work lands: queue, end or off",
    "batch_max": "tasks verified together at most",
    "batch_window": "adaptive or fixed",
    "verify_parallel": "verifications at once",
    "agent": "the agent spec of prompt tasks (name[:model[:effort]])",
    "fallback": "agents used while the default one's provider is paused",
    "review": "a reviewer agent after each task's check",
    "timeout": 'per attempt, check included ("30m")',
    "log_cap": "the largest log an attempt keeps",
    "budget": 'stop when the plan has spent this ("20 USD")',
    "escalate_after": "failed attempts before a stronger model",
    "escalate_effort": "at the top of the ladder, more effort",
    "gate_on": '"regressions" (default): a test already failing blames nobody; "green"',
    "quarantine": '"auto" (default): a flaky test blames nobody; "off"',
    "release_after": "passes that release a quarantined test (default 20)",
    "notify": "a command told when the run pauses, needs a person, or ends",
    "sockets": "sockets the sandbox lets a task reach",
    "host_ports": "the host's loopback TCP ports a sandboxed command with the network reaches",
    "scope": "a change outside a task's files: error or warn",
    "clean": "what a reused worktree drops: untracked or all",
    "sandbox": "every command under bubblewrap",
    "strict_model": "an attempt that ran another model than asked is INFRA",
    "auto": 'the pool of agent = "auto"',
    "candidates": "best-of-N: these specs at once on each prompt task",
    "best_of": "best-of-N: N attempts of the task's own spec",
    "select": "best-of-N: first or best",
    "judge": "best-of-N: the agent that names the best candidate",
    "agents": "[agents.NAME] tables: agents of this plan's own",
    "task": "the [[task]] tables",
    "id": "unique; letters, digits, `.`, `_` and `-` (it names a git branch)",
    "title": "one line",
    "prompt": "what the agent is asked to do: precise, self-contained",
    "run": "a shell command instead of an agent (a task has prompt or run)",
    "files": "what it may change: paths, folders (`src/app/`) or globs; required",
    "deps": "ids of tasks whose work it needs first",
    "check": "a command run in its worktree after the agent (e.g. its tests)",
    "estimate": "a relative size (default 1): orders the critical path",
    "network": "the task's check keeps the network in the sandbox",
}

EXAMPLE = """[[task]]
id = "model"
title = "Add the Health model"
prompt = "Add a Health dataclass in src/app/health.py with fields status and uptime; test it in tests/test_health.py."
files = ["src/app/health.py", "tests/test_health.py"]
check = "pytest -q tests/test_health.py"

[[task]]
id = "route"
title = "Expose GET /health"
prompt = "Add a GET /health route in src/app/routes.py that returns the Health model as JSON."
files = ["src/app/routes.py"]
deps = ["model"]
estimate = 2"""


@frozen
class Brief:
    goal: str
    base: str  # how the base is named, and its commit
    tracked: Sequence[str]
    agents: Mapping[str, str]  # name -> what is known of it (installed, not found, ...)
    default_agent: str
    plan_file: str  # where a planner that can write files answers
    target: str  # the file forge writes the plan to
    name: str  # the plan's name
    read_only: bool = False  # the planner cannot write files: it answers in its output
    base_key: str | None = None  # `--base REV`: the plan starts from it too


def _keys(keys: Sequence[str], skip: tuple[str, ...] = ()) -> str:
    return "\n".join(
        f"- `{k}`: {KEY_HELP.get(k, '(see forge docs)')}" for k in keys if k not in skip
    )


def folder_counts(paths: Sequence[str]) -> list[str]:
    """Paths as lines: each one when few, else counts per folder, as deep as stays
    under MAX_LISTED lines (files at the top level are always listed)."""
    if len(paths) <= MAX_LISTED:
        return list(paths)
    top = [p for p in paths if "/" not in p]
    lines: list[str] = []
    for depth in range(1, 64):
        counts = Counter("/".join(p.split("/")[:-1][:depth]) + "/" for p in paths if "/" in p)
        if len(counts) + len(top) > MAX_LISTED and lines:
            break
        lines = [f"{folder} ({n} files)" for folder, n in sorted(counts.items())]
        if all(p.count("/") <= depth for p in paths):
            break
    return sorted(top) + lines


def _block(text: str) -> str:
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}text\n{text.rstrip()}\n{fence}"


def render(
    brief: Brief, *, attempt: int, tries: int, problems: Sequence[str], last: str | None
) -> str:
    """The prompt of one try (`attempt` of `tries`); `problems` and `last` are the
    last answer's problems and its text (None: it gave none)."""
    listed = folder_counts(brief.tracked)
    agents = "\n".join(
        f"- `{n}`{' (the default)' if n == brief.default_agent else ''}: {what}"
        for n, what in brief.agents.items()
    )
    parts = [
        "# Draft a plan for forge",
        "forge runs coding tasks in parallel, each by an agent in a git worktree of its "
        "own, merges each finished task and verifies the merged result. Split the goal "
        "below into such tasks: small, each one change an agent can make and check "
        "alone; tasks that may change the same path never run at once, so keep their "
        "`files` apart where you can, and add `deps` only where a task needs another's "
        "work. Read the repository as you need; do not change it (whatever you change "
        f"here is discarded). Try {attempt} of {tries}.",
        "## The goal",
        brief.goal.strip(),
        f"## The repository at {brief.base}",
        f"{len(brief.tracked)} tracked files"
        + (" (counted per folder)" if len(listed) != len(brief.tracked) else "")
        + ":\n"
        + "\n".join(f"- {line}" for line in listed),
        "## The plan format (TOML)",
        f"The plan is named `{brief.name}`: leave `name` out."
        + (f' Set `base = "{brief.base_key}"`.' if brief.base_key else "")
        + " Top-level keys (all optional but [[task]]):\n"
        + _keys(PLAN_KEYS, skip=("name", "task")),
        "Keys of each [[task]] table (`id`, `files` and `prompt` or `run` are required):\n"
        + _keys(TASK_KEYS),
        "Every `files` entry names an existing path, or a new file in an existing folder. "
        "Ids are unique; dependencies form no cycle. For example:\n" + _block(EXAMPLE),
        "## Agents (for `agent`; leave it out to use the default)",
        agents,
        "## Your answer",
        (
            "You run read-only: end your reply with the plan, TOML only, in one ```toml block."
            if brief.read_only
            else f"Write the plan, TOML only, to the file `{brief.plan_file}` (its path is "
            "also in $FORGE_PLAN_FILE). If you cannot write files, end your reply with the "
            "plan in one ```toml block instead."
        )
        + " forge checks it as `forge plan --check` does and, when it is sound, writes it "
        f"to {brief.target}.",
    ]
    if problems:
        parts += [
            "## Problems with your last answer",
            "Fix each of these and answer again with the whole plan:\n"
            + "\n".join(f"- {p}" for p in problems),
        ]
        if last is not None:
            parts += ["Your last answer was:\n" + _block(last)]
    return "\n\n".join(parts) + "\n"
