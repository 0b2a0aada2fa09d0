"""The planner's prompt of `forge draft` and the reading of its answer."""

from __future__ import annotations

import json

from forge.agents.planners import answer_in_output
from forge.plan.load import PLAN_KEYS, TASK_KEYS
from forge.run.brief import KEY_HELP, Brief, folder_counts, render


def _brief(tracked: list[str]) -> Brief:
    return Brief(
        goal="Add a health endpoint",
        base="main @ abc1234",
        tracked=tracked,
        agents={"claude": "built in, installed", "codex": "built in, not installed"},
        default_agent="claude",
        plan_file="/tmp/try-1/plan.toml",
        target="plans/add.toml",
        name="add",
    )


def test_the_format_is_every_key_the_checker_accepts() -> None:
    assert set(PLAN_KEYS) | set(TASK_KEYS) <= set(KEY_HELP)  # a new key needs a line
    text = render(_brief(["a.py"]), attempt=1, tries=3, problems=[], last=None)
    for key in (*PLAN_KEYS, *TASK_KEYS):
        if key not in ("name", "task"):
            assert f"- `{key}`: {KEY_HELP[key]}" in text
    assert "`/tmp/try-1/plan.toml`" in text and "$FORGE_PLAN_FILE" in text
    assert "- `claude` (the default): built in, installed" in text
    assert "## Problems" not in text


def test_a_retry_lists_the_problems_and_the_last_answer() -> None:
    text = render(
        _brief(["a.py"]),
        attempt=2,
        tries=3,
        problems=["plans/add.toml:1: dependency cycle: a -> b -> a"],
        last='[[task]]\nid = "a"\n',
    )
    assert "- plans/add.toml:1: dependency cycle: a -> b -> a" in text
    assert 'id = "a"' in text and "Try 2 of 3" in text


def test_many_files_are_counted_per_folder() -> None:
    tracked = ["README.md"] + [f"src/m{n}/f{k}.py" for n in range(50) for k in range(10)]
    lines = folder_counts(tracked)
    assert lines[0] == "README.md" and "src/m7/ (10 files)" in lines and len(lines) == 51
    huge = [f"d{n}/e{k}/f.py" for n in range(400) for k in range(2)]
    assert folder_counts(huge)[:2] == ["d0/ (2 files)", "d1/ (2 files)"]
    assert folder_counts(["a.py", "b/c.py"]) == ["a.py", "b/c.py"]


def test_the_answer_is_read_from_each_cli_s_output() -> None:
    plan = '[[task]]\nid = "a"\nprompt = "x"\nfiles = ["a.py"]\n'
    text = f"Plan:\n```toml\n{plan}```\n"
    claude = json.dumps({"type": "result", "is_error": False, "result": text})
    assert answer_in_output("noise\n" + claude + "\n") == plan
    gemini = json.dumps({"response": text, "stats": {}}, indent=2)
    assert answer_in_output(gemini) == plan
    # Plain text: the last block wins over an example shown earlier.
    assert answer_in_output(f"```toml\n[[task]]\nid = 'x'\n```\n{text}") == plan
    assert answer_in_output("no plan here") is None
