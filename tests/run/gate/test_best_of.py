"""Best-of-N through the real CLI: candidates are attempts of their own, the gate
picks the winner, losers are stopped and salvaged (tests/fakes/agent_candidate.py
acts by the model it is asked for)."""

from __future__ import annotations

import json
import shlex
import sqlite3
import sys
from pathlib import Path

import pytest
from helpers.gitkit import FAKES, git, run_forge
from helpers.runkit import alive, kill9, plan_and_run, spawn_forge, state, wait_for, write_plan

AGENT = json.dumps(
    [sys.executable, str(FAKES / "agent_candidate.py"), "{model}", "a.txt", "--usage"]
)
MODELS = '["slow", "bad", "fast", "big", "small", "late", "empty"]'


def body(candidates: str, *, extra: str = "", check: str = "! grep -q bad a.txt") -> str:
    return (
        f"max_parallel = 3\ncandidates = {candidates}\n{extra}"
        f'[agents.fake]\ncommand = {AGENT}\nmodels = {MODELS}\nusage_format = "claude"\n'
        f'[[task]]\nid = "a"\nprompt = "write a.txt"\nfiles = ["a.txt"]\ncheck = "{check}"\n'
    )


@pytest.fixture
def shared(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "shared"
    folder.mkdir()
    monkeypatch.setenv("FORGE_FAKE_DIR", str(folder))
    return folder


def landed(repo: Path) -> str:
    return git(repo, "show", "forge/p-integration:a.txt")


def candidates(repo: Path) -> dict[str, dict[str, object]]:
    data = json.loads(run_forge(repo, "status", "a", "--json").stdout)
    return {str(c["agent"]): c for c in data["candidates"]}


@pytest.mark.usefixtures("unboxed")  # its agent writes down its pids
def test_the_fast_one_lands_the_slow_one_is_stopped_and_salvaged(
    repo: Path, tmp_path: Path, shared: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # fast passes once slow runs and bad's check has failed
    monkeypatch.setenv("FORGE_FAKE_WAIT_FOR", f"{shared / 'slow.pids'}:{shared / 'checked'}")
    checked = shlex.quote(str(shared / "checked"))
    check = f"if grep -q bad a.txt; then touch {checked}; exit 1; fi"
    plan = write_plan(tmp_path, body('["fake:slow", "fake:bad", "fake:fast"]', check=check))
    cp = plan_and_run(repo, plan)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert landed(repo) == "fast"
    pids = [int(p) for p in (shared / "slow.pids").read_text().split()]
    assert not any(alive(pid) for pid in pids)  # TERM ignored: KILLed, the grandchild too
    got = candidates(repo)
    assert got["fake:fast"]["outcome"] == "won"
    assert got["fake:slow"]["outcome"] == "stopped"
    assert got["fake:slow"]["reason"] == "lost to fake:fast"
    salvage = str(got["fake:slow"]["salvage"])
    assert git(repo, "show", f"{salvage}:a.txt") == "slow, unfinished"
    assert got["fake:bad"]["outcome"] == "failed"
    assert str(got["fake:bad"]["reason"]).startswith("check failed")
    assert (
        "a: candidate fake:slow lost to fake:fast; its work is kept in refs/forge/salvage/p/a+1/1"
        in cp.stderr + cp.stdout
    )
    assert [c["cost_usd"] for c in got.values()] == [None, 0.01, 0.01]  # (slow reported none)
    # What slow spent before it was stopped is unknown, not zero.
    assert [c["cost_known"] for c in got.values()] == [False, True, True]
    text = run_forge(repo, "status", "a").stdout
    assert "stopped: lost to fake:fast" in text and "won" in text
    slow_line = next(line for line in text.splitlines() if "lost to fake:fast" in line)
    assert "unknown" in slow_line
    # The attempt that took fast's work to the gate shows what fast spent.
    (landing,) = json.loads(run_forge(repo, "status", "a", "--json").stdout)["history"]
    assert landing["candidate"] == "fake:fast" and landing["cost_usd"] is None
    assert landing["candidate_spend"]["cost_usd"] == 0.01
    assert landing["candidate_spend"]["input_tokens"] > 0
    row = next(line for line in text.splitlines() if line.startswith("1 "))
    assert "$0.01" in row and "(candidate's)" in row, text
    # Its history says it lost, not that a person stopped it.
    con = sqlite3.connect(repo / ".git" / "forge" / "private" / "history.sqlite")
    reasons = [r for (r,) in con.execute("SELECT reason FROM attempts WHERE task = 'a+1'")]
    con.close()
    assert reasons == ["stopped: lost to fake:fast"]
    page = tmp_path / "report.html"
    assert run_forge(repo, "report", "-o", str(page)).returncode == 0
    html = page.read_text()
    assert "a fake:slow" in html and "a fake:bad" in html  # each candidate in the timeline
    assert "candidates: fake:slow stopped: lost to fake:fast" in html
    assert "fake:fast won" in html
    # every candidate's cost counts, the losers' too; the stopped one's is unknown
    spend = json.loads(run_forge(repo, "status", "--json").stdout)["spend"]
    assert spend["usd"] == 0.02 and spend["unpriced_attempts"] == 1
    rows = json.loads(run_forge(repo, "stats", "--json").stdout)["rows"]
    assert {r["agent"]: r["unpriced_attempts"] for r in rows}["fake:slow"] == 1


@pytest.mark.usefixtures("shared")
def test_best_picks_the_smaller_passing_diff(repo: Path, tmp_path: Path) -> None:
    plan = write_plan(
        tmp_path, body('["fake:big", "fake:small", "fake:bad"]', extra='select = "best"\n')
    )
    cp = plan_and_run(repo, plan)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert landed(repo) == "small"
    got = candidates(repo)
    assert got["fake:small"]["outcome"] == "won"
    assert (got["fake:big"]["outcome"], got["fake:big"]["reason"]) == ("passed", "not chosen")
    # The runner-up ends with the task: not QUEUED for good, in the state or the history.
    records = state(repo)["tasks"]["a"]["candidates"]
    assert all(r["status"] != "QUEUED" for r in records.values())
    con = sqlite3.connect(repo / ".git" / "forge" / "private" / "history.sqlite")
    outcomes = dict(con.execute("SELECT task, outcome FROM attempts WHERE task LIKE 'a+%'"))
    con.close()
    assert "QUEUED" not in outcomes.values() and outcomes["a+1"] == "FAILED"


def test_a_winner_that_breaks_verification_is_replaced(
    repo: Path, tmp_path: Path, shared: Path
) -> None:
    marker = shlex.quote(str(shared / "culprit"))
    verify = f"if grep -q fast a.txt; then touch {marker}; exit 1; fi"
    extra = f"verify = '''{verify}'''\nverify_reruns = 0\n"
    dependent = '[[task]]\nid = "b"\nrun = "cat a.txt > b.txt"\nfiles = ["b.txt"]\ndeps = ["a"]\n'
    plan = write_plan(tmp_path, body('["fake:fast", "fake:late"]', extra=extra) + dependent)
    cp = plan_and_run(repo, plan)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert landed(repo) == "late"
    # the dependent waited for the winner's MERGED: it saw the work that landed
    assert git(repo, "show", "forge/p-integration:b.txt") == "late"
    got = candidates(repo)
    assert got["fake:late"]["outcome"] == "won"
    assert got["fake:fast"]["outcome"] == "failed"
    assert "breaks verification" in str(got["fake:fast"]["reason"])
    assert state(repo)["tasks"]["a"]["status"] == "MERGED"
    # The task never failed: its candidate did, and another landed.
    said = cp.stdout + cp.stderr
    assert "a: candidate fake:fast FAILED" in said and "a: FAILED" not in said


@pytest.mark.usefixtures("shared")
def test_a_codex_candidate_is_priced_from_its_tokens(repo: Path, tmp_path: Path) -> None:
    replay = [sys.executable, str(FAKES / "agent_replay.py"), "codex-success.jsonl"]
    codex = json.dumps([*replay, "--exit", "0", "--touch", "a.txt"])
    text = body('["codex", "fake:bad"]') + f"[agents.codex]\ncommand = {codex}\n"
    cp = plan_and_run(repo, write_plan(tmp_path, text))
    assert cp.returncode == 0, cp.stdout + cp.stderr
    got = candidates(repo)
    assert got["codex"]["outcome"] == "won"
    # 12,000 in / 800 out at gpt-5's list price: Codex reports tokens, no USD.
    assert got["codex"]["cost_usd"] == pytest.approx((12_000 * 1.25 + 800 * 10) / 1e6)
    assert got["codex"]["cost_known"] is True


@pytest.mark.usefixtures("shared")
def test_all_candidates_failing_is_one_failed_task_naming_each(repo: Path, tmp_path: Path) -> None:
    plan = write_plan(tmp_path, body('["fake:bad", "fake:empty"]'))
    cp = plan_and_run(repo, plan)
    assert cp.returncode == 5, cp.stdout + cp.stderr
    assert "a: candidates: fake:bad failed: check failed" in cp.stdout
    ts = state(repo)["tasks"]["a"]
    assert ts["status"] == "FAILED"
    assert ts["reason"].startswith("all 2 candidates failed: fake:bad check failed")
    assert "; fake:empty no changes" in ts["reason"]


def test_the_budget_stops_new_candidates(repo: Path, tmp_path: Path, shared: Path) -> None:
    extra = 'budget = "0.005 USD"\n'
    plan = write_plan(
        tmp_path,
        body('["fake:bad", "fake:fast"]', extra=extra).replace(
            "max_parallel = 3", "max_parallel = 1"
        ),
    )
    cp = plan_and_run(repo, plan)
    assert cp.returncode == 8, cp.stdout + cp.stderr
    assert "budget" in cp.stdout
    assert (shared / "ran").read_text() == "bad\n"  # the second candidate never started


@pytest.mark.usefixtures("shared")
def test_a_retry_runs_each_candidate_again_with_its_own_failure(repo: Path, tmp_path: Path) -> None:
    plan = write_plan(tmp_path, body('["fake:bad", "fake:empty"]'))
    assert plan_and_run(repo, plan).returncode == 5
    cp = run_forge(repo, "retry", "a")
    assert cp.returncode == 5, cp.stdout + cp.stderr
    logs = repo / ".git/forge/plans/p/logs"
    assert "check failed" in (logs / "a+1/attempt-2/prompt.md").read_text()
    assert "no changes" in (logs / "a+2/attempt-2/prompt.md").read_text()
    got = candidates(repo)
    assert [c["attempts"] for c in got.values()] == [2, 2]
    assert state(repo)["tasks"]["a"]["reason"].startswith("all 2 candidates failed")


def test_best_verifies_each_candidate_and_lands_the_smallest_that_passes(
    repo: Path, tmp_path: Path, shared: Path
) -> None:
    runs = shlex.quote(str(shared / "runs"))
    verify = f"echo run >> {runs}; ! grep -qx small a.txt"
    extra = f'select = "best"\nverify = """{verify}"""\nverify_reruns = 0\n'
    plan = write_plan(tmp_path, body('["fake:small", "fake:big", "fake:fast"]', extra=extra))
    cp = plan_and_run(repo, plan)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert landed(repo) == "fast"  # small is smaller, but breaks verification
    got = candidates(repo)
    assert got["fake:small"]["outcome"] == "failed"
    assert "breaks verification" in str(got["fake:small"]["reason"])
    assert got["fake:fast"]["outcome"] == "won"
    assert (got["fake:big"]["outcome"], got["fake:big"]["reason"]) == ("passed", "not chosen")
    # one verification each; the gate's of the winner is answered from the cache
    assert (shared / "runs").read_text().count("run") == 3


@pytest.mark.usefixtures("shared")
def test_a_judge_chooses_and_its_cost_is_the_tasks(repo: Path, tmp_path: Path) -> None:
    judge = json.dumps([sys.executable, str(FAKES / "judge.py"), "{prompt_file}", "fake:big"])
    extra = f'select = "best"\njudge = "judge"\n[agents.judge]\ncommand = {judge}\nusage_format = "claude"\n'
    plan = write_plan(tmp_path, body('["fake:small", "fake:big"]', extra=extra))
    cp = plan_and_run(repo, plan)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert landed(repo) == "".join(f"line {i}\n" for i in range(10)).rstrip("\n")
    data = json.loads(run_forge(repo, "status", "a", "--json").stdout)
    assert data["cost_usd"] == pytest.approx(0.01 + 0.001 + 0.05)
    assert "judge judge: it says more" in cp.stdout + cp.stderr


def test_the_judges_agent_state_is_the_plans_and_clean_removes_it(
    repo: Path, tmp_path: Path, shared: Path
) -> None:
    """The judge's CLI home follows the one rule of every agent's (agent_state_dir):
    outside the repository, where the sandbox lets it write and `forge clean` looks."""
    from forge.git.repo import discover
    from forge.run.state.folders import agent_state_dir

    judge = json.dumps([sys.executable, str(FAKES / "judge.py"), "{prompt_file}", "fake:big"])
    extra = f'select = "best"\njudge = "judge"\n[agents.judge]\ncommand = {judge}\n'
    cp = plan_and_run(repo, write_plan(tmp_path, body('["fake:small", "fake:big"]', extra=extra)))
    assert cp.returncode == 0, cp.stdout + cp.stderr
    where = Path((shared / "judge-state").read_text())
    assert where == agent_state_dir(discover(repo), "p") and where.is_dir()
    assert not where.is_relative_to(repo)
    cleaned = run_forge(repo, "clean")
    assert cleaned.returncode == 0, cleaned.stdout + cleaned.stderr
    assert not where.exists()


@pytest.mark.usefixtures("unboxed")  # its agent writes down its pids
def test_a_killed_run_resumes_its_candidates_and_leaves_no_process(
    repo: Path, tmp_path: Path, shared: Path
) -> None:
    plan = write_plan(tmp_path, body('["fake:slow", "fake:late"]'))
    assert run_forge(repo, "plan", str(plan)).returncode == 0
    p = spawn_forge(repo, "run")
    wait_for(lambda: (shared / "slow.pids").exists(), what="the slow candidate")
    pids = [int(x) for x in (shared / "slow.pids").read_text().split()]
    kill9(p)  # both candidates wait: neither can have landed
    (shared / "release").touch()
    (shared / "culprit").touch()  # (what `late` waits for)
    cp = run_forge(repo, "run")
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert not any(alive(pid) for pid in pids)  # the killed run's candidate is stopped
    assert state(repo)["tasks"]["a"]["status"] == "MERGED"
    assert landed(repo) in ("late", "slow, unfinished")


@pytest.mark.usefixtures("shared")
def test_a_rate_limited_candidate_runs_again_on_a_fallback(repo: Path, tmp_path: Path) -> None:
    limited = json.dumps([sys.executable, str(FAKES / "agent_ratelimit.py")])
    extra = f'fallback = ["fake:fast"]\n[agents.rl]\ncommand = {limited}\n'
    plan = write_plan(tmp_path, body('["fake:bad", "rl"]', extra=extra))
    cp = plan_and_run(repo, plan)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert landed(repo) == "fast"
    got = candidates(repo)
    assert got["rl"]["outcome"] == "won" and got["rl"]["attempts"] == 2
    assert got["fake:bad"]["outcome"] == "failed"


def test_candidates_count_toward_their_agents_cap(repo: Path, tmp_path: Path, shared: Path) -> None:
    text = body('["fake:small", "fake:big"]', extra='select = "best"\n')
    capped = text.replace(
        'usage_format = "claude"\n', 'usage_format = "claude"\nmax_parallel = 1\n'
    )
    cp = plan_and_run(repo, write_plan(tmp_path, capped))
    assert cp.returncode == 0, cp.stdout + cp.stderr
    spans = (shared / "spans").read_text().split()
    assert sorted(spans) == ["+big", "+small", "-big", "-small"]
    assert spans[0][1:] == spans[1][1:]  # one ended before the other started


def test_a_candidate_whose_merge_conflicts_is_recorded_with_its_paths(
    repo: Path, tmp_path: Path, shared: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No gate: the chosen candidate merges at once, after `z` (scope "warn": it edits
    # a.txt too) has landed, since `fast` waits for `y`, which waits for `z`.
    landed_z = shared / "z-landed"
    monkeypatch.setenv("FORGE_FAKE_WAIT_FOR", str(landed_z))
    others = (
        '[[task]]\nid = "z"\nrun = "echo z > a.txt; echo z > z.txt"\nfiles = ["z.txt"]\n'
        f'[[task]]\nid = "y"\nrun = "touch {landed_z}; echo y > y.txt"\nfiles = ["y.txt"]\n'
        'deps = ["z"]\n'
    )
    text = body('["fake:fast", "fake:bad"]', extra='scope = "warn"\n') + others
    cp = plan_and_run(
        repo, write_plan(tmp_path, text.replace("max_parallel = 3", "max_parallel = 4"))
    )
    assert cp.returncode == 5, cp.stdout + cp.stderr
    assert landed(repo) == "z"
    conflict = "conflicts with integration in: a.txt (changed by landed task z)"
    winner = state(repo)["tasks"]["a"]["candidates"]["a+1"]
    assert (winner["status"], winner["reason"]) == ("CONFLICT", conflict)
    assert candidates(repo)["fake:fast"]["reason"] == conflict
    merge_log = Path(state(repo)["tasks"]["a"]["attempts"][-1]["log"])
    assert merge_log.read_text() == "conflicting paths:\na.txt\n"
