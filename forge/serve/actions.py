"""What the page may ask: hold a plan, resume it, retry a failed task. Each goes the
command line's way (the hold file, `forge retry`'s checks and command) with `web` as
its source, and is written to the plan's events log (`events.log` in its logs
folder), as a run writes its events. A retry with no run of the plan active starts
`forge retry TASK --plan PLAN` in the background as the serving user, its output in
the plan's logs folder; with a run active it is refused, saying so."""

from __future__ import annotations

import sys
import time

from forge.base.clock import now_iso
from forge.base.proc import spawn_detached
from forge.errors import ForgeError
from forge.git.repo import Repository
from forge.plan.registry import load_recorded
from forge.run import runner
from forge.run.state import hold as holds
from forge.run.state.run_state import FAILURES
from forge.run.state.store import StateStore
from forge.serve.views import run_active

SOURCE = "web"


def hold(repo: Repository, plan: str) -> str:
    h = holds.set_hold(repo.state, plan, reason="held from forge serve's page", source=SOURCE)
    return _said(repo, plan, f"hold set: {h.describe()}")


def resume(repo: Repository, plan: str) -> str:
    removed = holds.release(repo.state, plan)
    if removed is None:
        return _said(repo, plan, f"no hold was set on plan '{plan}'")
    return _said(repo, plan, f"hold removed ({removed.describe()})")


def retry(repo: Repository, plan: str, task: str) -> str:
    recorded = load_recorded(repo, plan)
    state = StateStore(repo.state, plan).load_existing()
    ts = state.tasks.get(task) if state else None
    if ts is None or ts.status not in FAILURES:
        status = ts.status if ts else "not run"
        raise ForgeError(f"task '{task}' of plan '{plan}' has not failed ({status}): no retry")
    if run_active(repo, plan):
        raise ForgeError(
            f"a run of plan '{plan}' is active: it retries failed tasks itself with "
            f"--retry-failed; otherwise retry '{task}' once it has ended"
        )
    runner.check_retry(repo, recorded.plan, task, agent=None)
    log = repo.state.logs_dir(plan) / f"retry-{task}-{time.strftime('%Y%m%d-%H%M%S')}.log"
    argv = [sys.executable, "-m", "forge", "retry", task, "--plan", plan]
    pid = spawn_detached(argv, cwd=repo.root, log_path=log)
    return _said(repo, plan, f"retry of '{task}' started (pid {pid}, output in {log})")


def _said(repo: Repository, plan: str, line: str) -> str:
    """The action, in the plan's events log with its source; the line for the page."""
    log = repo.state.logs_dir(plan) / "events.log"
    try:
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("a", encoding="utf-8") as fh:
            fh.write(f"[{now_iso()}] {SOURCE}: {line}\n")
    except OSError:
        pass  # an events log that cannot be written never stops an action
    return line
