"""`forge serve` and `forge run --serve`: start the server, say its address, and
serve until stopped (Ctrl-C or TERM)."""

from __future__ import annotations

import sys
import webbrowser
from collections.abc import Callable

from forge.base import interrupt
from forge.errors import ForgeError
from forge.git.repo import Repository
from forge.plan.repo_config import load_repo_config
from forge.serve import server
from forge.serve.guard import is_loopback

DEFAULT_PORT = 8765


def start(repo: Repository, *, host: str, port: int, say: Callable[[str], None]) -> server.Served:
    """Start serving `repo`'s plans and say where (with the token when one is needed)."""
    if not host.strip():
        raise ForgeError("--host needs an address (127.0.0.1, 0.0.0.0, a name)")
    prices = load_repo_config(repo.root).all_prices()
    served = server.start(repo, host=host, port=port, prices=prices)
    say(f"serving {repo.root.name}'s plans at {served.url}")
    if not is_loopback(host):
        say("bound to an address others can reach: every request needs the token in that address")
    return served


def start_beside(repo: Repository, *, say: Callable[[str], None]) -> server.Served:
    """`forge run --serve`: on 127.0.0.1, the usual port or, taken, any free one."""
    try:
        return start(repo, host="127.0.0.1", port=DEFAULT_PORT, say=say)
    except ForgeError:
        return start(repo, host="127.0.0.1", port=0, say=say)


def serve(repo: Repository, *, host: str, port: int, open_it: bool) -> None:
    """Serve until Ctrl-C or TERM: then stop, and return (a stop is the way it ends)."""
    with interrupt.on_stop_signals() as stop:
        served = start(repo, host=host, port=port, say=_print)
        if open_it and not webbrowser.open(served.url):
            _print(f"no browser to open {served.url} with: open it by hand")
        _until(stop, served)


def keep_serving(served: server.Served, say: Callable[[str], None]) -> None:
    """After `forge run --serve`'s run: its final state, until Ctrl-C or TERM."""
    say(f"the run has ended; still serving at {served.url} (Ctrl-C to stop)")
    with interrupt.on_stop_signals() as stop:
        _until(stop, served)


def _until(stop: interrupt.StopEvent, served: server.Served) -> None:
    try:
        while not stop.wait(0.5):  # (a timeout: a signal is handled between waits)
            pass
    finally:
        served.stop()


def _print(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()
