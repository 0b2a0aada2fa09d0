"""`forge serve`'s page in a real headless Chromium (driven by Playwright, the browser
the system installed): a run of shell tasks seen live, without reloading (a task from
RUNNING to MERGED, the gate's verification on the timeline, the blamed task's failing
test), and a plan of 500 tasks: the time to the first full render and from an event
in the journal to the page, with 20 events a second coming in."""

from __future__ import annotations

import shlex
import shutil
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from helpers.gitkit import commit_all, run_forge
from helpers.runkit import spawn_forge, wait_for, write_plan
from helpers.servekit import many_tasks, serving

from forge.base.liveness import Owner
from forge.run.state import events
from forge.run.state.run_state import Attempt

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
try:
    from playwright.sync_api import sync_playwright
except ImportError:  # the `web` extra is not installed
    sync_playwright = None  # type: ignore[assignment]

pytestmark = [
    pytest.mark.skipif(
        CHROMIUM is None, reason="Chromium is not installed (apt-get install chromium)"
    ),
    pytest.mark.skipif(
        sync_playwright is None, reason="Playwright is not installed (pip install '.[web]')"
    ),
]

PY = shlex.quote(sys.executable)


@contextmanager
def browser_page() -> Iterator[Any]:
    assert sync_playwright is not None and CHROMIUM is not None
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            yield browser.new_page(viewport={"width": 1280, "height": 900})
        finally:
            browser.close()


def _status_is(task: str, status: str) -> str:
    """A script true once the task's row in the table says `status`."""
    return (
        f"(() => {{ const r = document.getElementById('task-{task}');"
        f" return r !== null && r.cells[2].textContent.startsWith('{status}'); }})()"
    )


SUITE = """\
import pathlib

ROOT = pathlib.Path(__file__).parent.parent


def test_fine():
    assert True


def test_guard():
    assert not (ROOT / "culprit.txt").exists()
"""


def test_a_run_is_seen_live_without_reloading(repo: Path, tmp_path: Path) -> None:
    (repo / "tests").mkdir()
    (repo / "tests" / "test_suite.py").write_text(SUITE)
    (repo / ".gitignore").write_text("__pycache__/\n")
    commit_all(repo, "a suite")
    go = tmp_path / "go"
    verify = f"env PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 {PY} -m pytest -q -p no:cacheprovider"
    body = (
        f"verify = '{verify}'\nverify_reruns = 0\nmax_parallel = 2\n"
        '[[task]]\nid = "slow"\n'
        f'run = "while [ ! -f {go} ]; do sleep 0.05; done; echo s > slow.txt"\n'
        'files = ["slow.txt"]\n'
        '[[task]]\nid = "culprit"\nrun = "echo c > culprit.txt"\nfiles = ["culprit.txt"]\n'
    )
    plan = write_plan(tmp_path, body)
    assert run_forge(repo, "plan", str(plan)).returncode == 0
    with serving(repo) as url, browser_page() as page:
        run = spawn_forge(repo, "run", "p")
        try:
            page.goto(url + "plan/p")
            page.evaluate("window.loadedOnce = true")  # gone if the page reloads
            page.wait_for_function(_status_is("slow", "RUNNING"), timeout=60_000)
            page.wait_for_function(_status_is("culprit", "FAILED"), timeout=60_000)
            go.write_text("go")
            page.wait_for_function(_status_is("slow", "MERGED"), timeout=60_000)
            run.wait(timeout=60)
        finally:
            if run.poll() is None:
                run.kill()
        timeline = page.inner_text("#s-timeline")
        assert "verify:" in timeline, timeline
        culprit_row = page.inner_text("#task-culprit")
        assert "test_guard" in culprit_row, culprit_row
        assert "test_guard" in page.inner_text("#s-gate")
        assert page.evaluate("window.loadedOnce === true")
        assert page.inner_text("#live-state") == "live"


@pytest.mark.slow  # (about 10 s: 5 s of events, 500 tasks rendered; the run above is live too)
def test_500_tasks_render_fast_and_follow_20_events_a_second(repo: Path, tmp_path: Path) -> None:
    store = many_tasks(repo, tmp_path, 500)
    st = store.load_existing()
    assert st is not None
    me = Owner.me("test")
    with serving(repo) as url, browser_page() as page:
        t0 = time.monotonic()
        page.goto(url + "plan/big")
        page.wait_for_selector("#task-t499")
        page.wait_for_function("document.getElementById('live-state').textContent === 'live'")
        first_render = time.monotonic() - t0

        stop = threading.Event()

        def stream() -> None:  # 20 events a second: attempts starting on other tasks
            for i in range(300, 400):  # (5 s)
                if stop.wait(0.05):  # sleep-ok: the rate of the events, not a wait
                    return
                attempt = Attempt(number=1, agent="shell", slot=f"slot-{i % 4}")
                store.record(st, events.AttemptStarted(f"t{i:03d}", attempt, me))

        background = threading.Thread(target=stream)
        background.start()
        delays = []
        try:
            for i in range(250, 260):
                tid = f"t{i:03d}"
                store.record(st, events.AttemptStarted(tid, Attempt(number=1, agent="shell"), me))
                sent = time.monotonic()
                page.wait_for_function(_status_is(tid, "RUNNING"), polling="raf")
                delays.append(time.monotonic() - sent)
                t_answer = time.monotonic()
                page.evaluate("1")  # the page answers while updates stream in
                assert time.monotonic() - t_answer < 1.0
        except BaseException:
            stop.set()
            raise
        finally:
            background.join()
        wait_for(lambda: page.evaluate(_status_is("t399", "RUNNING")), what="the last event")
    print(
        f"\n500 tasks: first full render {first_render:.2f}s; event to page: "
        f"median {sorted(delays)[len(delays) // 2]:.2f}s, max {max(delays):.2f}s"
    )
    # The goals are 2 s and 1 s; the bounds leave room for a machine shared with others.
    assert first_render < 6.0
    assert max(delays) < 3.0, delays
