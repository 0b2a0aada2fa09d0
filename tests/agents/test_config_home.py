"""A per-task config folder keeps the user's CLI configuration (sessions, history
and locks stay per task)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from helpers.gitkit import FAKES, git
from helpers.runkit import plan_and_run, state, write_plan

from forge.agents.spec import PRESETS, AgentCall, AgentSpec, agent_env


def env_for(name: str, tmp_path: Path, environ: dict[str, str], task: str = "t1") -> dict[str, str]:
    defn = PRESETS[name]
    call = AgentCall(task, 1, tmp_path / "p.md", tmp_path / "state")
    return agent_env(defn, AgentSpec(name), call, environ=environ, as_root=False)


def test_codex_keeps_the_users_config_and_login(tmp_path: Path) -> None:
    home = tmp_path / "home"
    user = home / ".codex"
    (user / "sessions").mkdir(parents=True)
    (user / "config.toml").write_text('model_provider = "local"\n')
    (user / "auth.json").write_text("{}")
    (user / "state_5.sqlite").write_text("db")
    (user / "history.jsonl").write_text("old\n")
    env = env_for("codex", tmp_path, {"CODEX_API_KEY": "k", "HOME": str(home)})
    mine = Path(env["CODEX_HOME"])
    assert mine != user and mine.is_relative_to(tmp_path / "state" / "t1")
    assert (mine / "config.toml").read_text() == 'model_provider = "local"\n'
    assert (mine / "auth.json").resolve() == (user / "auth.json").resolve()
    for private in ("sessions", "state_5.sqlite", "history.jsonl"):
        assert not (mine / private).exists(), private
    # A setting changed later reaches the next attempt: it is a link.
    (user / "config.toml").write_text('model_provider = "other"\n')
    again = Path(
        env_for("codex", tmp_path, {"CODEX_API_KEY": "k", "HOME": str(home)})["CODEX_HOME"]
    )
    assert (again / "config.toml").read_text() == 'model_provider = "other"\n'


def test_a_folder_the_user_set_is_the_one_kept(tmp_path: Path) -> None:
    theirs = tmp_path / "their-codex"
    theirs.mkdir()
    (theirs / "config.toml").write_text("x = 1\n")
    env = env_for("codex", tmp_path, {"CODEX_API_KEY": "k", "CODEX_HOME": str(theirs)})
    assert env["CODEX_HOME"] != str(theirs)  # per task: their sessions stay theirs
    assert (Path(env["CODEX_HOME"]) / "config.toml").read_text() == "x = 1\n"


def test_claude_keeps_settings_and_copies_its_state_file(tmp_path: Path) -> None:
    home = tmp_path / "home"
    user = home / ".claude"
    (user / "projects").mkdir(parents=True)
    (user / "agents").mkdir()
    settings = {"env": {"ANTHROPIC_BASE_URL": "http://127.0.0.1:8080"}}
    (user / "settings.json").write_text(json.dumps(settings))
    (user / ".credentials.json").write_text("{}")
    (home / ".claude.json").write_text('{"mcpServers": {}}')
    env = env_for("claude", tmp_path, {"ANTHROPIC_API_KEY": "k", "HOME": str(home)})
    mine = Path(env["CLAUDE_CONFIG_DIR"])
    assert json.loads((mine / "settings.json").read_text()) == settings
    assert (mine / "agents").is_dir()
    assert not (mine / "projects").exists() and not (mine / ".credentials.json").exists()
    # The file parallel runs corrupt is a copy of its own, not a link to the user's.
    state_file = mine / ".claude.json"
    assert state_file.read_text() == '{"mcpServers": {}}' and not state_file.is_symlink()
    state_file.write_text("{}")
    assert (home / ".claude.json").read_text() == '{"mcpServers": {}}'


def test_gemini_keeps_the_chosen_auth_method(tmp_path: Path) -> None:
    home = tmp_path / "home"
    user = home / ".gemini"
    (user / "tmp").mkdir(parents=True)
    (user / "settings.json").write_text(
        '{"security": {"auth": {"selectedType": "gemini-api-key"}}}'
    )
    env = env_for("gemini", tmp_path, {"GEMINI_API_KEY": "k", "HOME": str(home)})
    mine = Path(env["GEMINI_CLI_HOME"]) / ".gemini"  # the CLI's home; config under .gemini
    assert "selectedType" in (mine / "settings.json").read_text()
    assert not (mine / "tmp").exists()


def test_tasks_get_folders_of_their_own(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / ".codex").mkdir(parents=True)
    environ = {"CODEX_API_KEY": "k", "HOME": str(home)}
    a = env_for("codex", tmp_path, environ, task="a")["CODEX_HOME"]
    b = env_for("codex", tmp_path, environ, task="b")["CODEX_HOME"]
    assert a != b


def test_a_run_sees_the_users_claude_settings(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A gateway's ANTHROPIC_BASE_URL in ~/.claude/settings.json must reach the CLI.
    user = Path(os.environ["HOME"]) / ".claude"
    user.mkdir(parents=True)
    (user / "settings.json").write_text('{"env": {"ANTHROPIC_BASE_URL": "http://127.0.0.1:9"}}')
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    fake = [sys.executable, str(FAKES / "agent_show_config.py")]
    argv = [*fake, "CLAUDE_CONFIG_DIR", "settings.json", "x.txt"]
    body = (
        f'agent = "claude"\n[agents.claude]\ncommand = {json.dumps(argv)}\n'
        '[[task]]\nid = "t"\nprompt = "do it"\nfiles = ["x.txt"]\n'
    )
    cp = plan_and_run(repo, write_plan(tmp_path, body))
    assert cp.returncode == 0, cp.stdout + cp.stderr + json.dumps(state(repo))
    seen = git(repo, "show", "forge/p-integration:x.txt")
    assert "http://127.0.0.1:9" in seen
    assert f"CLAUDE_CONFIG_DIR={user}" not in seen  # isolated, yet with the settings
