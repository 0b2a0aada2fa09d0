"""`notify = "command"`: tell a person's command when a run stops, as one JSON event
on its standard input: `{event, plan, tasks, reason, exit_code, time}`.

`event` is `paused` (a hold, the agents' infrastructure, the budget: exit 8),
`needs_person` (a task spent its retries, conflicts, or should be split; the
verification failed) or `ended` (anything else: done, or stopped by the user).
The command runs in a process group of its own with a time limit; whatever it
does, the run's outcome stays the run's: a failure is said once, never raised.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from forge.base.clock import now_iso
from forge.errors import ExitCode
from forge.frozen import frozen

if TYPE_CHECKING:
    from forge.run.runner import RunReport
    from forge.run.state.run_state import TaskState

LIMIT = 30.0  # seconds a notify command may take before its group is stopped
_NEEDS_PERSON = ("FAILED", "TIMEOUT", "CONFLICT")


@frozen
class Event:
    event: str
    plan: str
    tasks: list[dict[str, str]]
    reason: str
    exit_code: int
    time: str

    def to_json(self) -> str:
        return json.dumps(vars(self), indent=None) + "\n"


def _task(ts: TaskState) -> dict[str, str]:
    return {"id": ts.id, "status": str(ts.status), "reason": ts.reason or ""}


def event_of(report: RunReport) -> Event:
    """The event a run's end is."""
    state, code = report.state, report.exit_code
    tasks = list(state.tasks.values())
    if code == ExitCode.PAUSED:
        waiting = [_task(t) for t in tasks if t.status != "MERGED"]
        return _event("paused", report, waiting, report.paused or state.paused or "paused")
    stuck = [t for t in tasks if t.status in _NEEDS_PERSON or t.suggestion]
    if code in (ExitCode.FAILED, ExitCode.SPLIT) and not report.interrupted:
        if stuck:
            why = "; ".join(f"{t.id}: {t.status} ({t.reason})" if t.reason else t.id for t in stuck)
            return _event("needs_person", report, [_task(t) for t in stuck], why)
        verdict = report.verification.verdict if report.verification else None
        blocked = [_task(t) for t in tasks if t.status != "MERGED"]
        return _event("needs_person", report, blocked, f"verification {verdict or 'FAIL'}")
    merged = sum(1 for t in tasks if t.status == "MERGED")
    why = (
        "stopped by the user" if report.interrupted else f"{merged} of {len(tasks)} task(s) merged"
    )
    if report.verification is not None and not report.interrupted:
        why += f", verification {report.verification.verdict}"
    return _event("ended", report, [_task(t) for t in tasks], why)


def _event(kind: str, report: RunReport, tasks: list[dict[str, str]], reason: str) -> Event:
    return Event(kind, report.plan, tasks, reason, int(report.exit_code), now_iso())


def send(
    command: str,
    event: Event,
    *,
    cwd: Path,
    logs: Path,
    warn: Callable[[str], None] | None = None,
    limit: float = LIMIT,
) -> bool:
    """Run `command` (through bash) with `event` on stdin; False (said once through
    `warn`) when it fails, runs out of time or cannot start."""
    from forge.base.procgroup import GroupSpec, run_group

    logs.mkdir(parents=True, exist_ok=True)
    payload = logs / "notify-event.json"
    payload.write_text(event.to_json())
    log = logs / "notify.log"
    spec = GroupSpec(
        argv=command,
        cwd=cwd,
        log_path=log,
        timeout=limit,
        grace=1.0,
        input_path=payload,
        env={"FORGE_EVENT": event.event},
        tokens=True,  # the person's own command
    )
    result = run_group(spec)
    if result.returncode == 0 and not result.timed_out:
        return True
    if result.timed_out:
        why = f"took over {limit:g}s and was stopped"
    else:
        why = f"exited {result.returncode}"
    (warn or _stderr)(f"notify command {why} (the run goes on as it was; see {log})")
    return False


def _stderr(line: str) -> None:
    sys.stderr.write(f"forge: warning: {line}\n")


def notify_end(
    report: RunReport, command: str | None, *, cwd: Path, warn: Callable[[str], None] | None = None
) -> bool | None:
    """Tell `command` (None: nobody) how the run ended."""
    if not command:
        return None
    return send(command, event_of(report), cwd=cwd, logs=report.logs, warn=warn)
