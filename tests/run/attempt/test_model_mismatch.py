"""The model that really ran: a CLI that answers with another model than the one
asked for is named (and, with `strict_model`, INFRA), through the CLI."""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path

import pytest
from helpers.gitkit import FAKES, git, run_forge
from helpers.runkit import plan_and_run, state, write_plan

from forge.agents.models import matches, mismatch


def _plan(tmp_path: Path, ran: str, *, strict: bool = False) -> Path:
    argv = [sys.executable, str(FAKES / "agent_edit.py"), "{task}.txt", f"--ran={ran}"]
    body = f"strict_model = {'true' if strict else 'false'}\n" + 'agent = "fake:opus"\n'
    body += f'[agents.fake]\ncommand = {json.dumps(argv)}\nusage_format = "claude"\n'
    body += 'models = ["sonnet", "opus"]\n'
    body += '[[task]]\nid = "t"\nprompt = "edit"\nfiles = ["t.txt"]\n'
    return write_plan(tmp_path, body)


def test_a_model_mismatch_is_named(repo: Path, tmp_path: Path) -> None:
    cp = plan_and_run(repo, _plan(tmp_path, "claude-sonnet-4-5"))
    assert cp.returncode == 0, cp.stdout + cp.stderr
    text = run_forge(repo, "status", "t").stdout
    assert "model mismatch: asked opus, ran claude-sonnet-4-5" in text
    data = json.loads(run_forge(repo, "status", "t", "--json").stdout)
    (attempt,) = data["history"]
    assert attempt["models"] == ["claude-sonnet-4-5", "claude-haiku-4-5"]
    assert attempt["model_mismatch"] == "asked opus, ran claude-sonnet-4-5"
    con = sqlite3.connect(repo / ".git" / "forge" / "private" / "history.sqlite")
    row = con.execute("SELECT model_mismatch, landed FROM attempts").fetchone()
    con.close()
    assert row == ("asked opus, ran claude-sonnet-4-5", 1)
    page = run_forge(repo, "report").stdout.split("report: ")[1].strip()
    assert "model mismatch: asked opus, ran claude-sonnet-4-5" in Path(page).read_text()


def test_the_asked_family_is_no_mismatch(repo: Path, tmp_path: Path) -> None:
    cp = plan_and_run(repo, _plan(tmp_path, "claude-opus-4-5-20251101"))
    assert cp.returncode == 0, cp.stdout + cp.stderr
    (attempt,) = state(repo)["tasks"]["t"]["attempts"]
    assert attempt["model_mismatch"] is None


def test_strict_model_makes_a_mismatch_infra_and_pauses(repo: Path, tmp_path: Path) -> None:
    cp = plan_and_run(repo, _plan(tmp_path, "claude-sonnet-4-5", strict=True))
    assert cp.returncode == 8, cp.stdout + cp.stderr
    ts = state(repo)["tasks"]["t"]
    assert ts["status"] == "INFRA"
    assert ts["reason"].startswith("model: model mismatch: asked opus, ran claude-sonnet-4-5")
    assert "paused" in cp.stdout
    # Waiting does not bring the asked model back: forge says what to change.
    assert "again when it is back" not in cp.stdout
    assert "set `strict_model = false`" in cp.stdout and "then `forge run p`" in cp.stdout
    # No attempt spent, and its work never landed.
    data = json.loads(run_forge(repo, "status", "t", "--json").stdout)
    assert data["attempts"] == 0
    assert run_forge(repo, "status", "--json").returncode == 0
    assert "t.txt" not in git(repo, "ls-tree", "--name-only", "forge/p-integration")


@pytest.mark.parametrize(
    ("asked", "ran", "same"),
    [
        ("opus", "claude-opus-4-5-20251101", True),
        ("sonnet", "claude-sonnet-4-5", True),
        ("flash", "gemini-2.5-flash", True),
        ("gpt-5.4", "gpt-5.4", True),
        ("opus", "claude-sonnet-4-5", False),
        ("gemini-2.5-pro", "gemini-2.5-flash", False),
    ],
)
def test_an_alias_matches_its_family(asked: str, ran: str, same: bool) -> None:
    assert matches(asked, ran) is same


def test_a_helper_model_is_not_the_one_named() -> None:
    assert mismatch("opus", ["claude-haiku-4-5", "claude-sonnet-4-5"]) == (
        "asked opus, ran claude-sonnet-4-5"
    )
    assert mismatch("opus", ["claude-haiku-4-5", "claude-opus-4-5"]) is None
    assert mismatch(None, ["x"]) is None and mismatch("opus", []) is None
