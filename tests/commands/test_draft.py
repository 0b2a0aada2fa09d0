"""`forge draft` through the CLI, with a fake planner (tests/fakes/planner.py)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from helpers.gitkit import FAKES, git, run_forge
from helpers.runkit import user_view

from forge.base import sandbox

GOAL = "Add a health endpoint"
FILE = "plans/add-a-health-endpoint.toml"

SOUND = """[[task]]
id = "model"
title = "Add the Health model"
prompt = "Add src/health.py"
files = ["src/health.py"]

[[task]]
id = "route"
prompt = "Route /health in src/app.py"
files = ["src/app.py"]
deps = ["model"]
estimate = 2

[[task]]
id = "docs"
prompt = "Say so in the README"
files = ["README.md"]
"""

CYCLE = """[[task]]
id = "a"
prompt = "x"
files = ["src/app.py"]
deps = ["b"]

[[task]]
id = "b"
prompt = "y"
files = ["README.md"]
deps = ["a"]
"""


def _planner(repo: Path, tmp_path: Path, *answers: str, flags: tuple[str, ...] = ()) -> Path:
    """forge.toml with an agent `planner` answering `answers` in turn; returns the
    folder its prompts are kept in."""
    files = []
    for n, text in enumerate(answers, start=1):
        path = tmp_path / f"answer-{n}.toml"
        path.write_text(text)
        files.append(str(path))
    kept = tmp_path / "prompts"
    command = [sys.executable, str(FAKES / "planner.py"), "--keep", str(kept), *flags, *files]
    (repo / "forge.toml").write_text(
        f'[agents.planner]\ncommand = {json.dumps(command)}\nusage_format = "claude"\n'
        '[draft]\nagent = "planner"\n'
    )
    git(repo, "add", "forge.toml")
    git(repo, "commit", "-q", "-m", "planner")
    return kept


def _refs(repo: Path) -> str:
    return git(repo, "for-each-ref", "--format=%(refname) %(objectname)")


def test_a_sound_answer_is_written_checked_and_nothing_else_changes(
    repo: Path, tmp_path: Path
) -> None:
    kept = _planner(repo, tmp_path, SOUND, flags=("--touch", "src/stray.py", "--usage"))
    before, refs = user_view(repo), _refs(repo)
    cp = run_forge(repo, "draft", GOAL)
    assert cp.returncode == 0, cp.stderr
    assert (repo / FILE).read_text() == SOUND
    assert "critical path: model -> route (3 of 4 estimate)" in cp.stdout
    assert "parallelism: 1.3 (sum of estimates / critical path)" in cp.stdout
    assert "draft: 1 try by planner, cost $0.01" in cp.stdout
    assert cp.stdout.rstrip().endswith(f"next: forge plan {FILE}")
    # The planner's own edit stayed in its checkout, which is gone.
    assert "changed src/stray.py in its checkout; discarded" in cp.stderr
    assert not (repo / "src" / "stray.py").exists()
    # The user's branch, HEAD, index and refs as they were; the plan is the one new file.
    branch, head, status, index = user_view(repo)
    assert (branch, head, index) == (before[0], before[1], before[3]) and _refs(repo) == refs
    assert status == "?? " + FILE
    # Nothing recorded: no plan forge knows of until `forge plan`.
    assert not (repo / ".git" / "forge" / "plans").exists()
    check = run_forge(repo, "plan", "--check", FILE)
    assert check.returncode == 0, check.stderr
    prompt = (kept / "prompt-1.md").read_text()
    assert GOAL in prompt and "- src/app.py" in prompt and "`estimate`" in prompt
    # The try is a row of the history, shown by `forge stats`.
    rows = {r["agent"]: r for r in json.loads(run_forge(repo, "stats", "--json").stdout)["rows"]}
    assert rows["planner (draft)"]["attempts"] == 1
    assert rows["planner (draft)"]["cost_usd"] == 0.0125
    table = run_forge(repo, "stats").stdout.splitlines()
    total = next(line for line in table if line.startswith("total "))
    assert total.split()[:2] == ["total", "1"] and "$0.01" in total, table


def test_stats_say_n_a_of_a_planner_that_reported_no_cost(repo: Path, tmp_path: Path) -> None:
    _planner(repo, tmp_path, SOUND)
    assert run_forge(repo, "draft", GOAL).returncode == 0
    table = run_forge(repo, "stats").stdout
    assert "$0.00" not in table, table
    row = next(line for line in table.splitlines() if line.startswith("planner (draft)"))
    assert row.split()[7] == "n/a", row


def test_a_draft_leaves_no_planner_state_behind(repo: Path, tmp_path: Path) -> None:
    from forge.git.repo import discover
    from forge.run.state.folders import agent_state_dir

    _planner(repo, tmp_path, SOUND)
    folder = agent_state_dir(discover(repo), Path(FILE).stem)
    seen = tmp_path / "seen"
    # The planner is told its state folder; it exists while the draft runs.
    command = json.loads((repo / "forge.toml").read_text().split("command = ")[1].split("\n")[0])
    command = ["sh", "-c", f'ls -d "$FORGE_STATE_DIR" > {seen}; exec "$@"', "sh", *command]
    toml = (repo / "forge.toml").read_text().splitlines()
    toml[1] = f"command = {json.dumps(command)}"
    (repo / "forge.toml").write_text("\n".join(toml) + "\n")
    git(repo, "commit", "-qam", "planner says where its state is")
    cp = run_forge(repo, "draft", GOAL)
    assert cp.returncode == 0, cp.stderr
    assert seen.read_text().strip() == str(folder)
    assert not folder.parent.parent.exists(), list(folder.parent.parent.rglob("*"))


def test_a_cycle_is_sent_back_named_and_the_second_answer_written(
    repo: Path, tmp_path: Path
) -> None:
    kept = _planner(repo, tmp_path, CYCLE, SOUND)
    cp = run_forge(repo, "draft", GOAL, "--json")
    assert cp.returncode == 0, cp.stderr
    second = (kept / "prompt-2.md").read_text()
    assert f"- {FILE}:1: dependency cycle: a -> b -> a" in second
    assert 'deps = ["a"]' in second  # its last answer, to mend
    assert "dependency cycle" not in (kept / "prompt-1.md").read_text()
    data = json.loads(cp.stdout)
    assert data["tries"] == 2 and data["problems"] == [] and data["plan"] == SOUND
    assert data["file"] == str(repo / FILE) and data["critical_path"] == ["model", "route"]
    assert data["waves"] == [["model", "docs"], ["route"]] and data["parallelism"] == 1.333
    assert (repo / FILE).read_text() == SOUND


def test_no_sound_answer_exits_2_and_writes_nothing(repo: Path, tmp_path: Path) -> None:
    _planner(repo, tmp_path, CYCLE)
    cp = run_forge(repo, "draft", GOAL, "--tries", "2")
    assert cp.returncode == 2, cp.stderr
    assert not (repo / FILE).exists() and not (repo / "plans").exists()
    assert f"forge:   {FILE}:1: dependency cycle: a -> b -> a" in cp.stderr
    assert "no sound plan after 2 tries; nothing written" in cp.stderr
    log = Path(cp.stderr.rsplit("last answer: ", 1)[1].strip())
    assert log.read_text() == CYCLE
    as_json = run_forge(repo, "draft", GOAL, "--tries", "1", "--json")
    assert as_json.returncode == 2
    data = json.loads(as_json.stdout)
    assert data["file"] is None and data["plan"] is None and data["tries"] == 1
    assert data["problems"] == [f"{FILE}:1: dependency cycle: a -> b -> a"]
    assert Path(data["log"]).read_text() == CYCLE and not (repo / "plans").exists()


def test_an_existing_file_is_never_overwritten(repo: Path, tmp_path: Path) -> None:
    kept = _planner(repo, tmp_path, SOUND)
    (repo / "plans").mkdir()
    mine = repo / "plans" / "mine.toml"
    mine.write_text("# my own plan\n")
    cp = run_forge(repo, "draft", GOAL, "-o", "plans/mine.toml")
    assert cp.returncode == 2
    assert cp.stderr == (
        "forge: plans/mine.toml exists: give another file (-o FILE), or --force to replace it\n"
    )
    assert mine.read_text() == "# my own plan\n" and not kept.exists()  # no planner ran
    forced = run_forge(repo, "draft", GOAL, "-o", "plans/mine.toml", "--force")
    assert forced.returncode == 0, forced.stderr
    assert mine.read_text() == SOUND


def test_a_plan_printed_in_a_toml_block_is_read(repo: Path, tmp_path: Path) -> None:
    kept = _planner(repo, tmp_path, SOUND, flags=("--stdout",))
    # The checkout of a draft whose forge was killed is removed by the next draft.
    left = Path(os.environ["FORGE_WORKTREES"]) / repo.name / ".drafts" / "old-999999999-1"
    left.mkdir(parents=True)
    cp = run_forge(repo, "draft", GOAL, "-o", "health.toml", "--base", "main")
    assert not left.exists()
    assert cp.returncode == 0, cp.stderr
    assert (repo / "health.toml").read_text() == SOUND
    prompt = (kept / "prompt-1.md").read_text()
    assert "## The repository at main @ " in prompt and 'Set `base = "main"`.' in prompt


def test_a_files_entry_outside_the_repository_s_folders_is_a_warning(
    repo: Path, tmp_path: Path
) -> None:
    stray = SOUND.replace('files = ["README.md"]', 'files = ["README.md", "nowhere/x.md"]')
    _planner(repo, tmp_path, stray)
    cp = run_forge(repo, "draft", GOAL)
    assert cp.returncode == 0, cp.stderr
    assert (
        f"forge: warning: {FILE}: task `docs`: `files` entry 'nowhere/x.md' names no path"
        in cp.stderr
    )


def test_a_planner_s_outage_pauses_with_exit_8(repo: Path, tmp_path: Path) -> None:
    _planner(repo, tmp_path, SOUND, flags=("--say", "Error: 429 Too Many Requests"))
    cp = run_forge(repo, "draft", GOAL)
    assert cp.returncode == 8, cp.stderr
    assert cp.stderr.startswith("forge: paused: the planner could not run: rate-limit")
    assert not (repo / FILE).exists()


def test_bad_input_is_one_line_and_runs_no_planner(repo: Path, tmp_path: Path) -> None:
    kept = _planner(repo, tmp_path, SOUND)
    cp = run_forge(repo, "draft", GOAL, "--agent", "nosuch")
    assert cp.returncode == 2 and cp.stderr.startswith("forge: unknown agent 'nosuch'")
    assert cp.stderr.count("\n") == 1
    cp = run_forge(repo, "draft", GOAL, "-o", "plans/a b.toml")
    assert cp.returncode == 2 and "`a b` cannot name a plan" in cp.stderr
    cp = run_forge(repo, "draft", GOAL, "--base", "nosuch")
    assert cp.returncode == 2 and cp.stderr.count("\n") == 1, cp.stderr
    (repo / "forge.toml").write_text('[draft]\nplanner = "x"\n')
    cp = run_forge(repo, "draft", GOAL)
    assert cp.returncode == 2
    assert cp.stderr == (
        f"forge: {repo / 'forge.toml'}:1: [draft] takes one key: "
        'agent = "claude:opus" (the planner)\n'
    )
    assert not kept.exists() and not (repo / "plans").exists()


def test_a_sandboxed_planner_answers_in_its_plan_file(repo: Path) -> None:
    missing = sandbox.unavailable()
    if missing:
        pytest.skip(missing)
    # Under the sandbox the planner reads the repository and writes only its checkout
    # and its try's folder (where FORGE_PLAN_FILE is): its answer lives in the repo.
    answer = repo / ".git" / "answer.toml"
    answer.write_text(SOUND)
    # A shell planner: the interpreter of the tests may live under the /tmp the
    # sandbox makes private (a clone there), where the sandbox cannot see it.
    command = ["bash", "-c", f'touch x.py && cp {answer} "$FORGE_PLAN_FILE"']
    (repo / "forge.toml").write_text(f"[agents.planner]\ncommand = {json.dumps(command)}\n")
    cp = run_forge(repo, "draft", GOAL, "--agent", "planner", "--sandbox")
    assert cp.returncode == 0, cp.stderr
    assert (repo / FILE).read_text() == SOUND and "changed x.py" in cp.stderr


def test_a_planner_not_installed_pauses_with_exit_8(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(Path(sys.executable).parent) + ":/usr/bin:/bin")
    cp = run_forge(repo, "draft", GOAL, "--agent", "codex")
    assert cp.returncode == 8, cp.stderr
    assert "paused: the planner could not run: binary-missing: agent codex: `codex` not found" in (
        cp.stderr
    )
    assert not (repo / FILE).exists()


def test_a_planner_that_gives_no_plan_is_asked_again(repo: Path, tmp_path: Path) -> None:
    kept = _planner(repo, tmp_path, SOUND, flags=("--say", "I would rather not"))
    cp = run_forge(repo, "draft", GOAL, "--tries", "2")
    assert cp.returncode == 2 and not (repo / FILE).exists()
    said = "no plan in the answer (agent exited 1: I would rather not): write it to"
    assert said in cp.stderr and said in (kept / "prompt-2.md").read_text()


def test_a_plan_whose_agent_is_not_installed_is_written_with_a_warning(
    repo: Path, tmp_path: Path
) -> None:
    ghost = 'agent = "ghost"\n[agents.ghost]\ncommand = ["forge-no-such-agent", "{prompt_file}"]\n'
    _planner(repo, tmp_path, ghost + SOUND)
    cp = run_forge(repo, "draft", GOAL)
    assert cp.returncode == 0, cp.stderr
    check = run_forge(repo, "plan", "--check", FILE)
    said = [line for line in check.stderr.splitlines() if "forge-no-such-agent" in line]
    assert said and said[0] in cp.stderr.splitlines(), (said, cp.stderr)
    assert "tasks on it would stop as INFRA" in said[0]
