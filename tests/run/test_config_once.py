"""forge.toml is read once a run: an edit while the plan runs (here by the plan's own
first task) waits for the next run, so one run never verifies under two configs."""

from __future__ import annotations

from pathlib import Path

from helpers.gitkit import commit_all
from helpers.runkit import plan_and_run, state, statuses, write_plan

from forge.git.repo import discover
from forge.plan.repo_config import VerifyConfig, load_repo_config
from forge.verify import pool, quarantine

BEFORE = 'verify_pool_max = 2\n[verify]\ncommand = "true"\n[tests]\nquarantine = ["t::slow"]\n'
AFTER = 'verify_pool_max = 1\n[verify]\ncommand = "exit 1"\n'


def test_a_forge_toml_rewritten_by_a_task_leaves_the_run_on_its_first_reading(
    repo: Path, tmp_path: Path
) -> None:
    (repo / "forge.toml").write_text(BEFORE)
    commit_all(repo, "forge.toml")
    printf = AFTER.replace("\n", "\\n")
    # gate = "off": the integration head is verified once, after the last task
    plan = write_plan(
        tmp_path,
        'gate = "off"\n'
        f'[[task]]\nid = "a"\nfiles = ["a.txt"]\n'
        f"run = '''printf '{printf}' > {repo / 'forge.toml'} && echo a > a.txt'''\n"
        f'[[task]]\nid = "b"\nfiles = ["b.txt"]\ndeps = ["a"]\nrun = "echo b > b.txt"\n',
    )
    cp = plan_and_run(repo, plan)
    assert (repo / "forge.toml").read_text() == AFTER  # the task did rewrite it
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert statuses(repo) == {"a": "MERGED", "b": "MERGED"}
    verification = state(repo)["verification"]
    assert verification["verdict"] == "PASS"
    assert {n: lane["command"] for n, lane in verification["lanes"].items()} == {"verify": "true"}
    # the next run reads the new file
    config = load_repo_config(repo).verify
    assert config is not None and config.lanes == (("verify", "exit 1"),)


def test_a_verification_config_keeps_the_pool_and_tests_words_read_with_it(repo: Path) -> None:
    (repo / "forge.toml").write_text(BEFORE)
    config = load_repo_config(repo, read_agents=False).verify
    assert config is not None
    (repo / "forge.toml").write_text(AFTER)
    r = discover(repo)
    assert pool.pool_max(r, config) == 2
    assert quarantine.policy(r, config).team == frozenset({"t::slow"})
    # a config not read with forge.toml (a plan's recorded one) reads the file now
    bare = VerifyConfig(lanes=(("verify", "true"),))
    assert pool.pool_max(r, bare) == 1
    assert quarantine.policy(r, bare).team == frozenset()


def test_a_runs_agent_tables_are_read_once_not_at_each_use() -> None:
    """Inside a run, a spec is resolved against the run's AgentBook (its tables read
    into definitions when the run starts), never against raw tables again: no part of
    forge/run calls `forge.agents.spec.resolve` but the checks made before a run
    (a retry's `--agent`, the planner of `forge draft`)."""
    import ast

    run = Path(__file__).resolve().parents[2] / "forge" / "run"
    allowed = {"runner.py", "planner.py", "records/forecast.py"}
    found = []
    for path in sorted(run.rglob("*.py")):
        rel = path.relative_to(run).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
                continue
            owner = node.func.value
            named = isinstance(owner, ast.Name) and owner.id == "agents"
            if node.func.attr == "resolve" and named and rel not in allowed:
                found.append(f"{rel}:{node.lineno}")
    assert found == []
