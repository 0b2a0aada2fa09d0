"""Background verification, started by the post-commit and post-merge hooks.

At most one runs per repository. A newer one stops an older one still running for
another commit (SIGTERM: the older process stops its lanes, TERM/grace/KILL, and
records INTERRUPTED) and waits until its processes are gone before it starts. Who
runs is recorded with pid and start time, so a reused pid is never signalled.

    verify/background.json          the running one: owner, commit, lane tags
    verify/background-request.json  the newest commit asked for (older asks give way)
    verify/background.log           its output
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from forge.base import proc, procgroup
from forge.base.files import read_json_or, write_json
from forge.base.liveness import Owner
from forge.base.settings import DEFAULT_GRACE
from forge.frozen import frozen
from forge.git.repo import Repository, short_sha
from forge.plan.repo_config import VerifyConfig
from forge.verify import records as verify_records
from forge.verify.records import VerifyRecord

KEY = "hook"  # the checkouts of background verifications
_SETTLE = 30.0  # beyond its grace, how long an older verification gets to end itself


def _running_file(repo: Repository) -> Path:
    return repo.state.verify_dir / "background.json"


def _request_file(repo: Repository) -> Path:
    return repo.state.verify_dir / "background-request.json"


def log_file(repo: Repository) -> Path:
    return repo.state.verify_dir / "background.log"


@frozen
class Running:
    owner: Owner
    commit: str
    tags: tuple[str, ...]
    grace: float

    def alive(self) -> bool:
        return self.owner.alive()


def running(repo: Repository) -> Running | None:
    """The background verification that is running now, if any."""
    data = read_json_or(_running_file(repo), None, what="background verification file")
    if not isinstance(data, dict):
        return None
    found = Running(
        owner=Owner.from_dict(data["owner"]),
        commit=str(data["commit"]),
        tags=tuple(data.get("tags", ())),
        grace=float(data.get("grace", DEFAULT_GRACE)),
    )
    return found if found.alive() else None


def start(repo: Repository, commit: str, *, python: str | None = None) -> int:
    """Start a background verification of `commit`, detached; returns its pid at once."""
    write_json(_request_file(repo), {"commit": commit, "at": time.time()})
    argv = [python or sys.executable, "-P", "-m", "forge.hooks", "background", commit]
    return proc.spawn_detached(argv, cwd=repo.root, log_path=log_file(repo))


def wait_gone(owner: Owner, *, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while owner.alive():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def supersede(old: Running, *, log: Callable[[str], None] = print) -> None:
    """Stop an older background verification and wait until all its processes are gone."""
    log(
        f"forge: stopping the background verification of {short_sha(old.commit)} ({old.owner.describe()})"
    )
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(old.owner.pid, signal.SIGTERM)
    if not wait_gone(old.owner, timeout=old.grace + _SETTLE):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(old.owner.pid, signal.SIGKILL)
        wait_gone(old.owner, timeout=_SETTLE)
    # Whatever a dead (or killed) verifier left behind still carries its lanes' tags.
    for tag in old.tags:
        procgroup.stop_group(0, grace=old.grace, tag=tag, log=log)


def run(
    repo: Repository, commit: str, config: VerifyConfig, *, stop: threading.Event
) -> VerifyRecord | None:
    """The body of a background verification (runs in the detached process)."""
    from filelock import FileLock

    from forge.verify.engine import Ask, lane_tag, verify_commit

    tags = tuple(lane_tag(repo, KEY, name) for name, _cmd in config.lanes)
    lock = FileLock(str(repo.state.verify_dir / "background.lock"))
    with lock:
        request = read_json_or(_request_file(repo), {}, what="background request")
        if isinstance(request, dict) and request.get("commit") not in (None, commit):
            print(f"forge: {short_sha(commit)}: a newer commit was asked for; not verifying")
            return None
        old = running(repo)
        if old is not None:
            if old.commit == commit:
                print(f"forge: {short_sha(commit)} is already being verified")
                return None
            supersede(old)
        me = Owner.me("background verification")
        write_json(
            _running_file(repo),
            {
                "owner": me.to_dict(),
                "commit": commit,
                "tags": list(tags),
                "grace": config.grace,
            },
        )
    try:
        record = verify_commit(
            repo,
            commit,
            config,
            key=KEY,
            stop=stop,
            ask=Ask(on_event=lambda m: print(f"forge: {m}")),
        )
        print(
            f"forge: background verification of {short_sha(commit)}: {record.verdict}", flush=True
        )
        return record
    finally:
        # Not under the lock: a newer verification holds it while it waits for this
        # process to end, and writes its own file only once this one is gone.
        current = read_json_or(_running_file(repo), None, what="background verification file")
        if isinstance(current, dict) and current.get("owner", {}).get("pid") == os.getpid():
            with contextlib.suppress(FileNotFoundError):
                _running_file(repo).unlink()


def result_for(repo: Repository, commit: str) -> VerifyRecord | None:
    """The finished background verification of `commit`, if that was the last one."""
    record = verify_records.latest(repo.state, KEY)
    return record if record is not None and record.commit == commit else None
