"""Stopping an agent as soon as its CLI says the provider failed.

Some CLIs retry a rate limit or an outage on their own for minutes (aider: a
doubling delay up to a minute per call, over two minutes a run) before giving
up, while forge's backoff would do the same without holding a slot. For an
agent with `stop_on_infra`, a thread reads its log as it grows and stops the
run when one of the agent's own infrastructure messages appears (its exact
words only: the generic patterns would also match the model's talk).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from forge.agents.definition import AgentDef

_POLL = 0.25
_OVERLAP = 4096  # bytes read again, so a message split across two reads is seen


@dataclass
class Watch:
    event: threading.Event = field(default_factory=threading.Event)  # stops the run
    hit: str | None = None  # the message that stopped it


@contextmanager
def infra_watch(log: Path, defn: AgentDef, outer: threading.Event) -> Iterator[Watch]:
    """A stop event for one agent run: set when `outer` is (the user stops the
    run) or, for a `stop_on_infra` agent, when its log shows its own outage message."""
    if not defn.stop_on_infra:
        yield Watch(event=outer)  # nothing to read: the user's stop is the only one
        return
    watch = Watch()
    done = threading.Event()
    patterns = [re.compile(p, re.IGNORECASE) for _kind, items in defn.infra_patterns for p in items]

    def run() -> None:
        offset = 0
        while not done.wait(_POLL):
            if outer.is_set():
                watch.event.set()
                return
            try:
                with log.open("rb") as fh:
                    fh.seek(max(0, offset - _OVERLAP))
                    chunk = fh.read()
            except FileNotFoundError:
                continue
            offset = max(offset - _OVERLAP, 0) + len(chunk)
            text = chunk.decode(errors="replace")
            for rx in patterns:
                if m := rx.search(text):
                    watch.hit = m.group(0)
                    watch.event.set()
                    return

    thread = threading.Thread(target=run, name="agent-watch", daemon=True)
    thread.start()
    try:
        yield watch
    finally:
        done.set()
        thread.join()
