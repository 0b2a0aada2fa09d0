"""Following every plan of the repository: a short stat poll of each plan's records
(the snapshot, its journals, the holds, the run's owner file) and, when one changed,
the plan read again through the journal's one reader (the run state's store) and its
page rendered. Events that come faster than the poll are batched into one render:
20 events a second cost at most one render per poll.

The pages are kept as sections in a `Hub`; each client's stream waits on it for a
newer version and is sent only the sections that changed since it last looked (a
fresh connection: all of them, so a page reconnecting shows what a fresh load does).
"""

from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path

from forge.commands.report.render import Section
from forge.frozen import frozen
from forge.git.repo import Repository
from forge.run.state.store import Tail
from forge.serve import views

POLL = 0.05  # seconds between looks at the plans' records
INDEX = ""  # the hub's key of the index page


@frozen
class Pages:
    """One page's sections at a version (a counter shared by every page)."""

    version: int
    sections: list[Section]


class Hub:
    """The latest sections of every page; a stream waits here for a newer version."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._pages: dict[str, Pages] = {}
        self._version = 0
        self.closed = False

    def put(self, key: str, sections: list[Section]) -> None:
        with self._changed:
            self._version += 1
            self._pages[key] = Pages(self._version, sections)
            self._changed.notify_all()

    def get(self, key: str) -> Pages | None:
        with self._changed:
            return self._pages.get(key)

    def wait(self, key: str, after: int, timeout: float) -> Pages | None:
        """The page once its version is past `after` (None: not within `timeout`)."""
        with self._changed:
            self._changed.wait_for(lambda: self.closed or self._newer(key, after), timeout=timeout)
            page = self._pages.get(key)
            return page if page is not None and page.version > after else None

    def _newer(self, key: str, after: int) -> bool:
        page = self._pages.get(key)
        return page is not None and page.version > after

    def close(self) -> None:
        with self._changed:
            self.closed = True
            self._changed.notify_all()


Signature = tuple[tuple[str, int, int, int], ...]


def signature(repo: Repository, plan: str) -> Signature:
    """What changes when the plan's records do: each file's (name, inode, size, mtime)."""
    folder = repo.state.plan_dir(plan)
    paths = [repo.state.hold_file, folder / "hold.json", folder / "owner.json"]
    with contextlib.suppress(FileNotFoundError):
        paths += [folder / name for name in os.listdir(folder) if name.startswith("state")]
    out = []
    for path in sorted(paths):
        try:
            st = path.stat()
        except FileNotFoundError:
            continue
        out.append((path.name, st.st_ino, st.st_size, st.st_mtime_ns))
    return tuple(out)


class Follower:
    """The thread that keeps the hub's pages up to date with the plans' records."""

    def __init__(self, repo: Repository, hub: Hub, prices: views.Prices) -> None:
        self.repo, self.hub, self.prices = repo, hub, prices
        self._seen: dict[str, Signature] = {}
        self._rows: dict[str, str] = {}
        self._tails: dict[str, Tail] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="forge-serve-follow", daemon=True)

    def start(self) -> None:
        self.look()  # the first pages before the first request
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def _loop(self) -> None:
        while not self._stop.wait(POLL):
            self.look()

    def look(self) -> None:
        """Render every plan whose records changed since the last look, and the index
        when any did."""
        plans = self.repo.state.recorded_plans()
        changed = False
        for plan in plans:
            sig = signature(self.repo, plan) + _record_stamp(self.repo.state.plan_file(plan))
            if self._seen.get(plan) == sig:
                continue
            self._seen[plan] = sig
            tail = self._tails.setdefault(plan, Tail(self.repo.state.state_file(plan)))
            view = views.plan_view(self.repo, plan, self.prices, tail)
            self.hub.put(plan, view.sections)
            self._rows[plan] = view.row
            changed = True
        for gone in set(self._rows) - set(plans):
            del self._rows[gone], self._seen[gone]
            self._tails.pop(gone, None)
            changed = True
        if changed or self.hub.get(INDEX) is None:
            rows = [self._rows[p] for p in plans if p in self._rows]
            self.hub.put(INDEX, views.index_sections(self.repo, rows))


def _record_stamp(path: Path) -> Signature:
    try:
        st = path.stat()
    except FileNotFoundError:
        return ()
    return ((path.name, st.st_ino, st.st_size, st.st_mtime_ns),)
