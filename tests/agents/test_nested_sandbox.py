"""An agent CLI's own sandbox inside forge's: `sandbox_command` and
`root_sandbox_command` (Codex's and Claude Code's bubblewrap cannot map uid 0 in
a namespace nested in forge's; Claude Code's cannot mount a new /proc there), and
an API key given in the table's `env` isolating the CLI's state like one in the
environment."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from forge.agents.definition import AgentDef
from forge.agents.presets import over_preset
from forge.agents.spec import AgentCall, agent_env, resolve
from forge.base import procgroup
from forge.errors import ForgeError
from forge.run.attempt.agent import Ask, ask_agent
from forge.run.attempt.context import Command


class FakeRunner:
    """A runner that records the argv it is asked to run."""

    def __init__(self, slot: Path, *, sandboxed: bool) -> None:
        self.slot = slot
        self.state_dir = slot / "state"
        self.stop = threading.Event()
        self.sandboxed = sandboxed
        self.argv: list[str] = []

    def group(self, command: Command) -> procgroup.GroupResult:
        self.argv = list(command.argv)
        command.log.write_text("")
        return procgroup.GroupResult(0, timed_out=False, stopped=False, duration=0.0, pgid=1)


def _ran(tmp_path: Path, *, sandboxed: bool, root: bool, mp: pytest.MonkeyPatch) -> list[str]:
    mp.setattr("forge.run.attempt.agent.os.geteuid", lambda: 0 if root else 1000)
    _, spec = resolve("codex", {"codex": {"command": ["true", "plain"]}})
    table = {"command": ["true", "plain"], "root_sandbox_command": ["true", "root"]}
    defn = AgentDef.from_table("codex", {**table, "sandbox_command": ["true", "nested"]})
    prompt = tmp_path / "prompt.md"
    prompt.write_text("edit\n")
    runner = FakeRunner(tmp_path, sandboxed=sandboxed)
    ask_agent(Ask((defn, spec), "t", 1, prompt, tmp_path / "agent.log", None), runner)
    return runner.argv


@pytest.mark.parametrize(
    ("sandboxed", "root", "second"),
    [
        (True, True, "root"),
        (True, False, "nested"),
        (False, True, "plain"),
        (False, False, "plain"),
    ],
)
def test_the_sandbox_commands_run_only_in_forges_sandbox(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sandboxed: bool, root: bool, second: str
) -> None:
    assert _ran(tmp_path, sandboxed=sandboxed, root=root, mp=monkeypatch)[1] == second


def test_codex_runs_without_its_own_sandbox_only_as_root_in_forges() -> None:
    defn, _ = resolve("codex", {})
    assert defn.command[3:5] == ("--sandbox", "workspace-write")
    assert defn.root_sandbox_command[3:5] == ("--sandbox", "danger-full-access")
    assert defn.sandbox_command == ()


def test_claude_codes_own_sandbox_is_nested_or_off_in_forges() -> None:
    defn, _ = resolve("claude", {})
    assert "--settings" not in defn.command
    nested, root = defn.sandbox_command, defn.root_sandbox_command
    assert nested[-2:] == ("--settings", '{"sandbox":{"enableWeakerNestedSandbox":true}}')
    assert root[-2:] == ("--settings", '{"sandbox":{"enabled":false}}')
    assert nested[:-2] == root[:-2] == defn.command


def test_a_users_command_drops_the_presets_sandbox_commands() -> None:
    mine = over_preset("claude", {"command": ["my-claude"]})
    assert "root_sandbox_command" not in mine and "sandbox_command" not in mine
    both = over_preset("codex", {"command": ["a"], "root_sandbox_command": ["b"]})
    assert both["root_sandbox_command"] == ["b"]
    kept = over_preset("claude", {"models": ["m"]})
    assert "root_sandbox_command" in kept and "sandbox_command" in kept


def test_a_root_sandbox_command_is_checked_like_the_command() -> None:
    for key in ("sandbox_command", "root_sandbox_command"):
        with pytest.raises(ForgeError, match=rf"{key}: unknown placeholder \{{nope\}}"):
            AgentDef.from_table("x", {"command": ["a"], key: ["b", "{nope}"]})


def test_an_api_key_in_the_tables_env_isolates_the_state(tmp_path: Path) -> None:
    # A plan giving Codex its key in `[agents.codex] env` (not in forge's own
    # environment) gets a CODEX_HOME per task, as with the key exported.
    defn, spec = resolve("codex", {"codex": {"env": {"CODEX_API_KEY": "k"}}})
    call = AgentCall("t1", 1, tmp_path / "p.md", tmp_path / "state")
    env = agent_env(defn, spec, call, environ={}, as_root=False)
    assert Path(env["CODEX_HOME"]).is_relative_to(tmp_path / "state" / "t1")
    bare, spec = resolve("codex", {})
    assert "CODEX_HOME" not in agent_env(bare, spec, call, environ={}, as_root=False)


def test_a_planner_stays_read_only_in_forges_sandbox() -> None:
    from forge.agents.planners import as_planner

    claude, read_only = as_planner(resolve("claude", {})[0])
    assert read_only
    for argv in (claude.command, claude.sandbox_command, claude.root_sandbox_command):
        assert argv[2:4] == ("--permission-mode", "plan")
    codex, _ = as_planner(resolve("codex", {})[0])
    assert codex.command[3:5] == ("--sandbox", "read-only")
    # As root in forge's sandbox Codex's own cannot start, read-only or not.
    assert codex.root_sandbox_command[3:5] == ("--sandbox", "danger-full-access")
