"""The reviewer gate: a reviewer agent judges each task after its check."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from helpers.gitkit import FAKES, git, run_forge
from helpers.runkit import merge_count, plan_and_run, state, statuses, write_plan

PY = sys.executable
REVIEWER = [PY, str(FAKES / "reviewer.py")]


def agents(reviewer: list[str], worker: str | None = None, extra: str = "") -> str:
    worker = worker or f"{PY} {FAKES}/agent_edit.py $FORGE_TASK.txt"
    return (
        f'agent = "worker"\n{extra}'
        f"[agents.worker]\ncommand = {json.dumps(['bash', '-c', worker])}\n"
        f"[agents.rev]\ncommand = {json.dumps(reviewer)}\n"
    )


def task(tid: str, extra: str = "") -> str:
    return (
        f'[[task]]\nid = "{tid}"\ntitle = "the {tid} task"\nprompt = "write {tid}"\n'
        f'files = ["{tid}.txt"]\n{extra}\n'
    )


def attempts(repo: Path, tid: str = "t") -> list[dict[str, object]]:
    result: list[dict[str, object]] = state(repo)["tasks"][tid]["attempts"]
    return result


def test_an_approved_task_merges_and_its_history_says_so(repo: Path, tmp_path: Path) -> None:
    copy = tmp_path / "review-prompt.md"
    reviewer = [*REVIEWER, "t.txt", "edit by t", "--copy-prompt", str(copy)]
    body = agents(reviewer, extra='review = "rev"\n') + task("t")
    cp = plan_and_run(repo, write_plan(tmp_path, body))
    assert cp.returncode == 0, cp.stdout + cp.stderr
    [only] = attempts(repo)
    assert only["status"] == "MERGED"
    assert isinstance(only["review"], dict) and only["review"]["verdict"] == "approve"
    assert only["review"]["agent"] == "rev"
    prompt = copy.read_text()  # the task's prompt, its files and the diff
    assert "write t" in prompt and "`t.txt`" in prompt and "+edit by t attempt 1" in prompt
    history = run_forge(repo, "status", "t").stdout
    assert "review" in history.splitlines()[1] and "approve (rev)" in history
    data = json.loads(run_forge(repo, "status", "t", "--json").stdout)
    assert data["history"][0]["review"]["verdict"] == "approve"


def test_a_reject_fails_and_its_findings_reach_the_next_attempt(repo: Path, tmp_path: Path) -> None:
    copies = tmp_path / "prompt-$FORGE_ATTEMPT.md"
    worker = f'{PY} {FAKES}/agent_copy_prompt.py "{copies}" t.txt'
    # Through the {review_file} placeholder; approves once a second attempt wrote.
    reviewer = [*REVIEWER, "t.txt", "attempt 2", "--file", "{review_file}"]
    reviewer += ["--findings", "t.txt needs a second line"]
    body = agents(reviewer, worker, extra='review = "rev"\n') + task("t")
    cp = plan_and_run(repo, write_plan(tmp_path, body))
    assert cp.returncode == 5
    [first] = attempts(repo)
    assert first["status"] == "FAILED"
    assert first["reason"] == "review: t.txt needs a second line"
    assert merge_count(repo, "t") == 0
    cp = run_forge(repo, "retry", "t")
    assert cp.returncode == 0, cp.stdout + cp.stderr
    second = (tmp_path / "prompt-2.md").read_text()
    assert "t.txt needs a second line" in second and "review" in second
    assert [a["status"] for a in attempts(repo)] == ["FAILED", "MERGED"]


def test_without_a_file_the_exit_code_decides(repo: Path, tmp_path: Path) -> None:
    reviewer = [*REVIEWER, "t.txt", "never there", "--exit-code", "--findings", "no tests added"]
    body = agents(reviewer, extra='review = "rev"\n') + task("t")
    cp = plan_and_run(repo, write_plan(tmp_path, body))
    assert cp.returncode == 5
    assert attempts(repo)[0]["reason"] == "review: no tests added"


def test_review_false_turns_the_plans_reviewer_off(repo: Path, tmp_path: Path) -> None:
    reviewer = [*REVIEWER, "x", "never there"]
    body = agents(reviewer, extra='review = "rev"\n') + task("a") + task("b", "review = false")
    cp = plan_and_run(repo, write_plan(tmp_path, body))
    assert cp.returncode == 5
    assert statuses(repo) == {"a": "FAILED", "b": "MERGED"}
    assert attempts(repo, "b")[0]["review"] is None


def test_a_tasks_own_reviewer(repo: Path, tmp_path: Path) -> None:
    body = agents([*REVIEWER, "x", "never there"]) + task("a") + task("b", 'review = "rev"')
    cp = plan_and_run(repo, write_plan(tmp_path, body))
    assert cp.returncode == 5
    assert statuses(repo) == {"a": "MERGED", "b": "FAILED"}


def test_a_reviewer_that_cannot_run_is_infra(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FORGE_INFRA_BACKOFF", "0.05")
    body = agents(["no-such-reviewer-binary"], extra='review = "rev"\n') + task("t")
    cp = plan_and_run(repo, write_plan(tmp_path, body))
    assert cp.returncode == 8, cp.stdout + cp.stderr
    [only] = attempts(repo)
    assert only["status"] == "INFRA" and str(only["reason"]).startswith("review: binary-missing")
    assert "rev paused" in str(state(repo)["paused"])
    # Nothing judged the work: the task branch holds none of it, so a later
    # attempt does it again instead of finding it done.
    assert git(repo, "ls-tree", "--name-only", "forge/p/t") == git(
        repo, "ls-tree", "--name-only", "main"
    )
    assert json.loads(run_forge(repo, "status", "--json").stdout)["tasks"][0]["attempts"] == 0


def test_the_reviews_cost_is_the_tasks(repo: Path, tmp_path: Path) -> None:
    worker = f"{PY} {FAKES}/agent_edit.py t.txt --usage"
    reviewer = [*REVIEWER, "t.txt", "edit", "--cost", "0.5"]
    extra = 'review = "rev"\n'
    body = agents(reviewer, worker, extra) + 'usage_format = "claude"\n' + task("t")
    body = body.replace("[agents.worker]\n", '[agents.worker]\nusage_format = "claude"\n')
    cp = plan_and_run(repo, write_plan(tmp_path, body))
    assert cp.returncode == 0, cp.stdout + cp.stderr
    [only] = attempts(repo)
    assert only["cost_usd"] == pytest.approx(0.5123)
    assert (only["input_tokens"], only["output_tokens"]) == (107, 23)


def test_a_reviewer_that_commits_changes_nothing_that_lands(repo: Path, tmp_path: Path) -> None:
    script = (
        "echo sneaky > t.txt && git -c user.name=r -c user.email=r@x commit -qam sneaky; "
        'echo \'{"verdict": "approve"}\' > "$FORGE_REVIEW_FILE"'
    )
    body = agents(["bash", "-c", script], extra='review = "rev"\n') + task("t")
    cp = plan_and_run(repo, write_plan(tmp_path, body))
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert git(repo, "show", "forge/p-integration:t.txt") == "edit by t attempt 1"
    assert "sneaky" not in git(repo, "log", "--format=%s", "--all")


def test_a_reviewers_output_is_capped_as_every_command_of_the_attempt(
    repo: Path, tmp_path: Path
) -> None:
    loud = (
        f"yes y | head -c 5000; echo the-last-word; exec {PY} {FAKES}/reviewer.py t.txt 'edit by t'"
    )
    body = agents(["bash", "-c", loud], extra='review = "rev"\nlog_cap = "1K"\n') + task("t")
    cp = plan_and_run(repo, write_plan(tmp_path, body))
    assert cp.returncode == 0, cp.stdout + cp.stderr
    [only] = attempts(repo)
    assert isinstance(only["review"], dict) and only["review"]["verdict"] == "approve"
    text = Path(only["review"]["log"]).read_text()
    assert "log cap of 1024 bytes reached" in text and "the-last-word" not in text
