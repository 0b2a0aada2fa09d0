"""`forge report` through the real CLI: a page that parses, holds every task and
its attempts, links only to relative paths (no network), escapes task text, stays
under 1 MB for 200 tasks, and renders in a real headless Chromium."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest
from helpers.gitkit import FAKES, git, run_forge
from helpers.runkit import plan_and_run, state, write_plan

from forge.git.refs import integration_ref
from forge.git.repo import discover
from forge.plan.registry import record
from forge.run.state.records import Phase
from forge.run.state.run_state import Attempt, RunState, Status, TaskState
from forge.run.state.store import StateStore

AGENT = json.dumps([sys.executable, str(FAKES / "agent_edit.py"), "c.txt", "--usage"])

PLAN = f"""\
max_parallel = 2
verify = "true"
setup = "true"
agent = "fake"
[agents.fake]
command = {AGENT}
usage_format = "claude"

[[task]]
id = "a"
title = "<script>alert('a')</script> & more"
run = "echo a > a.txt"
files = ["a.txt"]
check = "true"

[[task]]
id = "b"
run = "echo b > b.txt"
files = ["b.txt"]
deps = ["a"]

[[task]]
id = "c"
prompt = "edit c"
files = ["c.txt"]

[[task]]
id = "bad"
run = "echo 'it broke' && exit 4"
files = ["bad.txt"]
"""


class Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.ids: set[str] = set()
        self.links: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        for key, value in attrs:
            if key == "id" and value:
                self.ids.add(value)
            if key in ("src", "href") and value is not None:
                self.links.append(value)

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def parse(html: str) -> Page:
    page = Page()
    page.feed(html)
    page.close()
    return page


def test_report_of_a_run(repo: Path, tmp_path: Path) -> None:
    cp = plan_and_run(repo, write_plan(tmp_path, PLAN))
    assert cp.returncode == 5, cp.stdout + cp.stderr
    out = tmp_path / "out" / "run.html"
    cp = run_forge(repo, "report", "-o", str(out))
    assert cp.returncode == 0, cp.stderr
    assert cp.stdout == f"report: {out}\n"
    html = out.read_text()
    page = parse(html)
    assert {"task-a", "task-b", "task-c", "task-bad"} <= page.ids
    assert "script" not in page.tags  # the title's <script> is text, escaped
    assert "&lt;script&gt;alert(&#x27;a&#x27;)&lt;/script&gt; &amp; more" in html
    assert "svg" in page.tags and "rect" in page.tags and "path" in page.tags  # DAG, edges
    assert "http://" not in html and "https://" not in html
    logs = [link for link in page.links if not link.startswith("#")]
    assert logs, "no links to logs"
    for link in logs:
        assert not os.path.isabs(link) and (out.parent / link).is_file(), link
    text = " ".join(page.text)
    assert "command exited 4: it broke" in text  # bad's reason
    assert "$0.0123" in text  # the fake agent's reported cost
    # the verification of what landed: its verdict on the integration head
    head = git(repo, "rev-parse", "forge/p-integration")
    assert f"<h2>Verification</h2><p><b>PASS</b> on <code>{head[:12]}</code>" in html
    for phase in ("setup", "run", "check", "merge", "agent"):
        assert phase in text, phase  # the timeline's legend
    # the default place: beside the logs, links relative to it
    cp = run_forge(repo, "report")
    default = repo / ".git" / "forge" / "plans" / "p" / "report.html"
    assert cp.stdout == f"report: {default}\n" and default.is_file()


def _big_state(repo: Path, tmp_path: Path, n: int) -> None:
    lines = ['name = "big"']
    for i in range(n):
        deps = f'deps = ["t{i - 10:03d}"]\n' if i >= 10 else ""
        lines.append(
            f'[[task]]\nid = "t{i:03d}"\ntitle = "Task number {i} with a longer title"\n'
            f'run = "true"\nfiles = ["f{i}.txt"]\n{deps}'
        )
    plan = tmp_path / "big.toml"
    plan.write_text("\n".join(lines) + "\n")
    forge_repo = discover(repo)
    record(forge_repo, plan)
    tasks = {}
    t0 = 1_700_000_000.0
    for i in range(n):
        ts = TaskState(id=f"t{i:03d}", status=Status.MERGED if i % 7 else Status.FAILED)
        for number in (1, 2) if i % 7 == 0 else (1,):
            start = t0 + i * 3 + number
            log = repo / ".git" / "forge" / "plans" / "big" / "logs" / ts.id / "agent.log"
            ts.attempts.append(
                Attempt(
                    number=number,
                    agent="claude:sonnet",
                    status=ts.status,
                    reason="check failed: 1 failed, 20 passed" if i % 7 == 0 else "",
                    duration=4.0,
                    log=str(log),
                    cost_usd=0.05,
                    slot=f"slot-{i % 4}",
                    phases=[
                        Phase(name, start + k, start + k + 1)
                        for k, name in enumerate(("worktree", "setup", "agent", "check", "merge"))
                    ],
                )
            )
        tasks[ts.id] = ts
    st = RunState(plan="big", integration=integration_ref("big"), tasks=tasks, wall_seconds=900.0)
    StateStore(forge_repo.state, "big").save(st)


def test_report_of_200_tasks_is_under_1_mb(repo: Path, tmp_path: Path) -> None:
    _big_state(repo, tmp_path, 200)
    out = tmp_path / "big.html"
    cp = run_forge(repo, "report", "big", "-o", str(out))
    assert cp.returncode == 0, cp.stderr
    size = out.stat().st_size
    assert size < 1_000_000, f"{size} bytes"
    page = parse(out.read_text())
    assert all(f"task-t{i:03d}" in page.ids for i in range(200))
    assert "$11.45" in out.read_text()  # 229 attempts (29 tasks took two) at $0.05


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(
    _chromium() is None,
    reason="Chromium is not installed (apt-get install chromium): the page is not rendered",
)
def test_report_renders_in_headless_chromium(repo: Path, tmp_path: Path) -> None:
    cp = plan_and_run(repo, write_plan(tmp_path, PLAN))
    assert cp.returncode == 5, cp.stdout + cp.stderr
    out = tmp_path / "page.html"
    assert run_forge(repo, "report", "-o", str(out)).returncode == 0
    browser = _chromium()
    assert browser is not None
    flags = [
        browser,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        f"--user-data-dir={tmp_path / 'profile'}",
    ]
    dom = subprocess.run(
        [*flags, "--dump-dom", out.as_uri()], capture_output=True, text=True, timeout=120
    )
    assert dom.returncode == 0, dom.stderr[-2000:]
    rendered = parse(dom.stdout)
    assert {"task-a", "task-b", "task-c", "task-bad"} <= rendered.ids
    shot = tmp_path / "shot.png"
    cp2 = subprocess.run(
        [*flags, f"--screenshot={shot}", "--window-size=1200,900", out.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert cp2.returncode == 0 and shot.is_file(), cp2.stderr[-2000:]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000


def test_a_plan_run_twice_shows_each_run_as_a_segment(repo: Path, tmp_path: Path) -> None:
    """A second run two hours after the first: the header adds up the runs' time and
    the timeline cuts the idle two hours out (a marked break), so neither run is a
    sliver; long labels are cut with `…` and whole in their `<title>`."""
    long_id = "a-task-with-a-very-long-name-indeed"
    _two_runs_state(repo, tmp_path, long_id)
    out = tmp_path / "two.html"
    cp = run_forge(repo, "report", "two", "-o", str(out))
    assert cp.returncode == 0, cp.stderr
    html = out.read_text()
    text = " ".join(parse(html).text)
    assert "over 2 runs (the last 10.0s)" in text
    assert "idle 2h00m between two runs" in html
    # The axis spans the runs' time and a narrow break, not two hours.
    ticks = [t for t in parse(html).text if t.endswith("s") and t[:-1].replace(".", "").isdigit()]
    assert ticks and all(float(t[:-1]) < 60 for t in ticks if t[-2].isdigit())
    assert f"<title>{long_id}</title>" in html  # the lane's whole name
    assert "…" in html


def _two_runs_state(repo: Path, tmp_path: Path, long_id: str) -> None:
    plan = tmp_path / "two.toml"
    plan.write_text(
        'name = "two"\n'
        f'[[task]]\nid = "{long_id}"\nrun = "true"\nfiles = ["a.txt"]\n'
        '[[task]]\nid = "b"\nrun = "true"\nfiles = ["b.txt"]\n'
    )
    forge_repo = discover(repo)
    record(forge_repo, plan)
    t0 = 1_700_000_000.0
    tasks = {}
    for tid, start, slot in ((long_id, t0, long_id), ("b", t0 + 7210, "slot-1")):
        ts = TaskState(id=tid, status=Status.MERGED)
        ts.attempts.append(
            Attempt(
                number=1,
                agent="run",
                status=Status.MERGED,
                duration=10.0,
                slot=slot,
                phases=[
                    Phase("worktree", start, start + 0.2),
                    Phase("run", start + 0.2, start + 9.8),
                    Phase("merge", start + 9.8, start + 10.0),
                ],
            )
        )
        tasks[tid] = ts
    st = RunState(plan="two", integration=integration_ref("two"), tasks=tasks, wall_seconds=10.0)
    StateStore(forge_repo.state, "two").save(st)


def test_the_time_axis_cuts_idle_time_between_runs() -> None:
    from forge.commands.report.axis import clock

    one = clock([(0.0, 10.0), (5.0, 20.0)])
    assert one.runs == 1 and one.span == 20.0 and one.breaks() == []
    two = clock([(100.0, 110.0), (3700.0, 3710.0)])
    assert two.runs == 2 and two.active == 20.0
    assert two.at(100.0) == 0.0 and two.at(110.0) == 10.0
    assert abs(two.at(3700.0) - 10.4) < 1e-9  # the hour is cut to 2% of the runs' time
    assert abs(two.span - 20.4) < 1e-9


def test_the_report_keeps_every_runs_gate_verifications(repo: Path, tmp_path: Path) -> None:
    """Three invocations of one plan (a run whose task fails the gate, a retry that
    lands it, and a run with nothing left to do): the report counts three runs and
    lists the gate's verifications of every one, not the last run's (none)."""
    fixed = tmp_path / "fixed"
    plan = write_plan(
        tmp_path,
        'verify = "test ! -e bad.txt"\nverify_reruns = 0\n'
        '[[task]]\nid = "ok"\nrun = "echo ok > ok.txt"\nfiles = ["ok.txt"]\n'
        f'[[task]]\nid = "bad"\nrun = "if test -e {fixed}; then rm -f bad.txt; '
        'else touch bad.txt; fi; echo b > b.txt"\nfiles = ["bad.txt", "b.txt"]\n',
    )
    first = plan_and_run(repo, plan)
    assert first.returncode == 5, first.stderr
    fixed.write_text("")
    assert run_forge(repo, "retry", "bad").returncode == 0
    assert run_forge(repo, "run").returncode == 0  # nothing left: no verification
    out = tmp_path / "r.html"
    assert run_forge(repo, "report", "-o", str(out)).returncode == 0
    html = out.read_text()
    text = " ".join(parse(html).text)
    assert "over 3 runs" in text, text[:2000]
    # The run line goes from the first run's start to the last one's end.
    started = state(repo)["invocations"]
    assert f"{started[0]['started']} \u2192 " in text and "(3 runs; the last from" in text
    section = html[html.index("Gate verifications") :]
    rows = section[: section.index("</table>")].count("<tr>") - 1  # less the header
    assert rows >= 3, section[:3000]  # a batch and a bisection, then the retry's batch
    runs = re.findall(r"<tr><td>\d+</td><td>(\d+)</td><td>(\w+)</td>", section)
    assert ("1", "batch") in runs and ("2", "batch") in runs, runs
