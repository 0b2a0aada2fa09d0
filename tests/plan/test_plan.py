"""The plan model: loading, strict validation, normalization, round trips, forge.toml."""

from __future__ import annotations

import textwrap
from dataclasses import replace
from pathlib import Path

import pytest

from forge.base.durations import parse_duration
from forge.errors import ForgeError, PlanError
from forge.plan.lanes import LaneOptions
from forge.plan.load import load_plan
from forge.plan.model import (
    DEFAULT_MAX_PARALLEL,
    DEFAULT_TIMEOUT,
    Plan,
    Task,
)
from forge.plan.patterns import normalize_pattern
from forge.plan.repo_config import RepoConfig, VerifyConfig, load_repo_config

GOOD = """\
name = "health"
base = "main"
max_parallel = 3
setup = "pip install -e ."
verify = "pytest -q"
verify_reruns = 1
agent = "claude:sonnet:medium"
timeout = "45m"
escalate_after = 2
escalate_effort = true
scope = "warn"
clean = "all"

[agents.mine]
command = ["my-agent", "--model", "{model}", "--prompt-file", "{prompt_file}"]
models = ["small", "large"]
efforts = ["low", "high"]

[[task]]
id = "model"
title = "Add the Health model"
prompt = "Add a Health dataclass"
files = ["./src/app//health.py", "tests/"]

[[task]]
id = "route"
prompt = "Expose it"
files = ["src/app/routes.py"]
deps = ["model"]
check = "pytest -q tests/test_routes.py"
agent = "codex"
timeout = 90
estimate = 2.5

[[task]]
id = "changelog"
run = "echo entry >> CHANGELOG.md"
files = ["CHANGELOG.md"]
"""


def write(tmp_path: Path, text: str, name: str = "plan.toml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def problems_of(tmp_path: Path, text: str, name: str = "plan.toml") -> list[str]:
    path = write(tmp_path, text, name)
    with pytest.raises(PlanError) as info:
        load_plan(path)
    for line in info.value.problems:
        assert line.startswith(str(path)), line
        assert "\n" not in line
    return info.value.problems


def test_good_plan_loads_every_field(tmp_path: Path) -> None:
    plan = load_plan(write(tmp_path, GOOD))
    assert plan.name == "health"
    assert plan.source == (tmp_path / "plan.toml").resolve()
    assert (plan.base, plan.max_parallel, plan.setup) == ("main", 3, "pip install -e .")
    assert plan.verify == VerifyConfig(lanes=(("verify", "pytest -q"),), reruns=1)
    assert (plan.agent, plan.timeout) == ("claude:sonnet:medium", 2700.0)
    assert (plan.escalate_after, plan.escalate_effort) == (2, True)
    assert (plan.scope, plan.clean) == ("warn", "all")
    assert plan.agents["mine"]["models"] == ["small", "large"]
    assert plan.task_ids == ("model", "route", "changelog")
    model, route, changelog = plan.tasks
    assert model.files == ("src/app/health.py", "tests")
    assert model.title == "Add the Health model" and not model.is_shell
    assert route.title == "route"  # defaults to the id
    assert (route.deps, route.check, route.agent) == (
        ("model",),
        "pytest -q tests/test_routes.py",
        "codex",
    )
    assert (route.timeout, route.estimate) == (90.0, 2.5)
    assert changelog.is_shell and changelog.run == "echo entry >> CHANGELOG.md"
    assert plan.task("route") is route
    assert plan.timeout_of(route) == 90.0 and plan.timeout_of(model) == 2700.0
    # the task's own timeout, then its agent's, then the plan's
    assert plan.timeout_of(route, 60.0) == 90.0 and plan.timeout_of(model, 60.0) == 60.0


def test_defaults(tmp_path: Path) -> None:
    plan = load_plan(
        write(tmp_path, '[[task]]\nid = "a"\nrun = "true"\nfiles = ["."]\n', "my-plan.toml")
    )
    assert plan.name == "my-plan"  # the file's stem
    assert plan.max_parallel == DEFAULT_MAX_PARALLEL == 2
    assert plan.timeout == DEFAULT_TIMEOUT == 1800.0
    assert (plan.base, plan.verify, plan.agent, plan.setup) == (None, None, None, None)
    assert (plan.escalate_after, plan.escalate_effort, plan.scope, plan.clean) == (
        3,
        False,
        "error",
        "untracked",
    )
    assert plan.tasks[0].files == (".",)
    assert plan.verify_parallel == 1


def test_verify_parallel_is_read_and_survives_the_record(tmp_path: Path) -> None:
    plan = load_plan(write(tmp_path, 'verify_parallel = 2\n[[task]]\nid = "a"\n' + TASK))
    assert plan.verify_parallel == 2
    assert Plan.from_dict(plan.to_dict()).verify_parallel == 2


def test_batch_window_is_adaptive_unless_fixed(tmp_path: Path) -> None:
    assert load_plan(write(tmp_path, '[[task]]\nid = "a"\n' + TASK)).batch_window == "adaptive"
    plan = load_plan(write(tmp_path, 'batch_window = "fixed"\n[[task]]\nid = "a"\n' + TASK))
    assert plan.batch_window == "fixed"
    assert Plan.from_dict(plan.to_dict()).batch_window == "fixed"


def test_unknown_task_raises_forge_error(tmp_path: Path) -> None:
    plan = load_plan(write(tmp_path, GOOD))
    with pytest.raises(ForgeError, match="unknown task 'nope' in plan 'health' \\(tasks: model,"):
        plan.task("nope")
    assert plan.find_task("nope") is None


def test_round_trip_is_exact(tmp_path: Path) -> None:
    import json

    plan = load_plan(write(tmp_path, GOOD))
    again = Plan.from_dict(json.loads(json.dumps(plan.to_dict())))
    assert again == plan
    assert again.to_dict() == plan.to_dict()


def test_verify_lanes_table(tmp_path: Path) -> None:
    plan = load_plan(
        write(
            tmp_path,
            """
            [verify]
            reruns = 0
            timeout = "10m"
            grace = 2
            [verify.lanes]
            unit = "pytest -q"
            lint = "ruff check ."
            [[task]]
            id = "a"
            run = "true"
            files = ["a"]
            """,
        )
    )
    assert plan.verify == VerifyConfig(
        lanes=(("unit", "pytest -q"), ("lint", "ruff check .")), reruns=0, timeout=600.0, grace=2.0
    )


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("90s", 90),
        ("30m", 1800),
        ("1h", 3600),
        ("1h30m", 5400),
        ("2m5s", 125),
        (45, 45),
        (1.5, 1.5),
        ("12", 12),
        ("0.5h", 1800),
        ("500ms", 0.5),
        ("1d", 86400),
        ("1H 30M", 5400),
        ("2 minutes", 120),
    ],
)
def test_parse_duration(value: str | int | float, seconds: float) -> None:
    assert parse_duration(value) == seconds


@pytest.mark.parametrize("value", ["", "soon", "10x", "-5", 0, -1, True, "h"])
def test_parse_duration_rejects(value: str | int | float) -> None:
    with pytest.raises(ValueError):
        parse_duration(value)


@pytest.mark.parametrize(
    ("raw", "norm"),
    [
        ("./a//b/", "a/b"),
        ("a/./b", "a/b"),
        (".", "."),
        ("./", "."),
        ("src/", "src"),
        ("*.py", "*.py"),
    ],
)
def test_normalize_pattern(raw: str, norm: str) -> None:
    assert normalize_pattern(raw) == norm


def test_missing_file_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(ForgeError, match=r"plan file .*nope\.toml not found"):
        load_plan(tmp_path / "nope.toml")


TASK = 'run = "true"\nfiles = ["x"]\n'

# (plan text, a fragment every matching problem line holds, its line number or None)
INVALID = {
    "syntax": ('name = "x"\n[[task]\nid = "a"\n', "TOML syntax error", 2),
    "unknown-top": (
        'nmae = "x"\n[[task]]\nid = "a"\n' + TASK,
        "unknown key `nmae` (did you mean `name`?)",
        1,
    ),
    "unknown-task-key": (
        '[[task]]\nid = "a"\n' + TASK + '[[task]]\nid = "b"\n' + TASK + 'depends = ["a"]\n',
        "task `b`: unknown key `depends` (did you mean `deps`?)",
        9,
    ),
    "duplicate-id": (
        '[[task]]\nid = "a"\n' + TASK + '[[task]]\nid = "a"\n' + TASK,
        "task `a`: duplicate id (first used at line 1)",
        5,
    ),
    "bad-id": ('[[task]]\nid = "a b"\n' + TASK, "task `a b`: id is not valid", 2),
    "id-dotdot": ('[[task]]\nid = "a..b"\n' + TASK, "`..`", 2),
    "id-lock": ('[[task]]\nid = "a.lock"\n' + TASK, "`.lock`", 2),
    "missing-id": ("[[task]]\n" + TASK, "task #1: missing `id`", 1),
    "bad-name": ('name = "x/y"\n[[task]]\nid = "a"\n' + TASK, "plan name `x/y` is not valid", 1),
    "integration-name": (
        'name = "x-integration"\n[[task]]\nid = "a"\n' + TASK,
        "cannot end in `-integration`",
        1,
    ),
    "unknown-dep": (
        '[[task]]\nid = "a"\n' + TASK + 'deps = ["ghost"]\n',
        "task `a`: unknown dependency `ghost`",
        5,
    ),
    "cycle": (
        '[[task]]\nid = "a"\n'
        + TASK
        + 'deps = ["b"]\n[[task]]\nid = "b"\n'
        + TASK
        + 'deps = ["a"]\n',
        "dependency cycle: a -> b -> a",
        1,
    ),
    "self-cycle": ('[[task]]\nid = "a"\n' + TASK + 'deps = ["a"]\n', "dependency cycle: a -> a", 1),
    "neither": ('[[task]]\nid = "a"\nfiles = ["x"]\n', "task `a`: needs `prompt`", 1),
    "both": (
        '[[task]]\nid = "a"\nprompt = "p"\n' + TASK,
        "task `a`: has both `prompt` and `run`",
        4,
    ),
    "no-files": ('[[task]]\nid = "a"\nrun = "true"\n', "task `a`: missing `files`", 1),
    "empty-files": (
        '[[task]]\nid = "a"\nrun = "true"\nfiles = []\n',
        "task `a`: `files` is empty",
        4,
    ),
    "absolute": ('[[task]]\nid = "a"\nrun = "true"\nfiles = ["/etc/passwd"]\n', "is absolute", 4),
    "dotdot": ('[[task]]\nid = "a"\nrun = "true"\nfiles = ["src/../../x"]\n', "contains `..`", 4),
    "max-parallel": (
        'max_parallel = 0\n[[task]]\nid = "a"\n' + TASK,
        "`max_parallel` must be at least 1",
        1,
    ),
    "verify-parallel": (
        'verify_parallel = 0\n[[task]]\nid = "a"\n' + TASK,
        "`verify_parallel` must be at least 1",
        1,
    ),
    "batch-window": (
        'batch_window = "auto"\n[[task]]\nid = "a"\n' + TASK,
        '`batch_window` must be "adaptive" or "fixed"',
        1,
    ),
    "wrong-type": (
        'max_parallel = "3"\n[[task]]\nid = "a"\n' + TASK,
        "`max_parallel` must be a whole number",
        1,
    ),
    "files-type": ('[[task]]\nid = "a"\nrun = "true"\nfiles = "x"\n', "`files` must be a list", 4),
    "timeout": ('[[task]]\nid = "a"\n' + TASK + 'timeout = "soon"\n', "task `a`: `timeout`", 5),
    "scope": (
        'scope = "loud"\n[[task]]\nid = "a"\n' + TASK,
        '`scope` must be "error" or "warn"',
        1,
    ),
    "no-tasks": ('name = "x"\n', "no tasks", None),
    "verify-both": (
        '[verify]\ncommand = "a"\n[verify.lanes]\nu = "b"\n[[task]]\nid = "a"\n' + TASK,
        "set exactly one of `command` and `lanes`",
        1,
    ),
    "verify-unknown": (
        '[verify]\ncommand = "a"\ngrase = 3\n[[task]]\nid = "a"\n' + TASK,
        "unknown key `grase` (did you mean `grace`?)",
        3,
    ),
    "agents-shape": (
        '[agents.mine]\ncommand = "my-agent"\n[[task]]\nid = "a"\n' + TASK,
        "agent `mine`: `command` must be a non-empty list of strings",
        1,
    ),
}


@pytest.mark.parametrize("case", sorted(INVALID))
def test_invalid_plans(tmp_path: Path, case: str) -> None:
    text, fragment, line = INVALID[case]
    problems = problems_of(tmp_path, text)
    hits = [p for p in problems if fragment in p]
    assert hits, problems
    if line is not None:
        assert hits[0].startswith(f"{tmp_path / 'plan.toml'}:{line}: "), hits[0]


def test_every_problem_is_reported_at_once(tmp_path: Path) -> None:
    problems = problems_of(
        tmp_path,
        """\
        max_parallel = 0
        [[task]]
        id = "a"
        depends = ["b"]
        files = ["/abs"]
        [[task]]
        id = "a"
        prompt = "p"
        files = ["x"]
        deps = ["ghost"]
        """,
    )
    joined = "\n".join(problems)
    for fragment in ("max_parallel", "`depends`", "needs `prompt`", "is absolute", "duplicate id"):
        assert fragment in joined, joined
    assert len(problems) >= 5


def test_invalid_stem_needs_a_name(tmp_path: Path) -> None:
    problems = problems_of(tmp_path, '[[task]]\nid = "a"\n' + TASK, name="my plan.toml")
    assert any("(from the file name)" in p and 'set `name = "..."`' in p for p in problems)


def test_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "plan.toml"
    path.write_bytes(b'name = "\xff"\n')
    with pytest.raises(PlanError, match="not UTF-8"):
        load_plan(path)


def test_task_and_plan_construct_directly() -> None:
    plan = Plan(name="p", tasks=(Task(id="a", run="true", files=("x",)),))
    assert Plan.from_dict(plan.to_dict()) == plan


# --- forge.toml -------------------------------------------------------------------


def test_repo_config_missing_is_empty(tmp_path: Path) -> None:
    assert load_repo_config(tmp_path) == RepoConfig()


def test_repo_config_loads(tmp_path: Path) -> None:
    (tmp_path / "forge.toml").write_text(
        '[agents.mine]\ncommand = ["x", "{prompt_file}"]\nmodels = ["s", "l"]\n'
        '[verify]\ncommand = "pytest -q"\nreruns = 1\ntimeout = "5m"\n'
    )
    cfg = load_repo_config(tmp_path)
    assert cfg.agents == {"mine": {"command": ["x", "{prompt_file}"], "models": ["s", "l"]}}
    assert cfg.verify == VerifyConfig(lanes=(("verify", "pytest -q"),), reruns=1, timeout=300.0)


def test_repo_config_lanes(tmp_path: Path) -> None:
    (tmp_path / "forge.toml").write_text('[verify.lanes]\nunit = "pytest"\nlint = "ruff check ."\n')
    cfg = load_repo_config(tmp_path)
    assert cfg.verify is not None and [n for n, _ in cfg.verify.lanes] == ["unit", "lint"]


@pytest.mark.parametrize(
    ("text", "fragment", "line"),
    [
        ('[verfy]\ncommand = "x"\n', "unknown key `verfy` (did you mean `verify`?)", 1),
        ('[verify]\ncommand = "x"\nrerun = 2\n', "unknown key `rerun`", 3),
        ('[verify]\ncommand = "x"\nreruns = -1\n', "`reruns` must be a whole number >= 0", 3),
        ('[agents.a]\nmodels = "big"\n', "agent `a`: `models`", 1),
        ("[verify\n", "TOML syntax error", 1),
    ],
)
def test_repo_config_problems(tmp_path: Path, text: str, fragment: str, line: int) -> None:
    (tmp_path / "forge.toml").write_text(text)
    with pytest.raises(PlanError) as info:
        load_repo_config(tmp_path)
    hits = [p for p in info.value.problems if fragment in p]
    assert hits, info.value.problems
    assert hits[0].startswith(f"{tmp_path / 'forge.toml'}:{line}: "), hits[0]


def test_cycle_through_a_task_with_other_problems_is_still_reported(tmp_path: Path) -> None:
    problems = problems_of(
        tmp_path,
        '[[task]]\nid = "b"\nfiles = ["src"]\ndeps = ["c"]\n'
        '[[task]]\nid = "c"\nrun = "true"\nfiles = ["x"]\ndeps = ["b"]\n',
    )
    assert any("needs `prompt`" in p for p in problems)
    assert any(p.endswith(":1: dependency cycle: b -> c -> b") for p in problems), problems


def test_a_lane_may_be_a_table_and_a_plan_may_say_how_it_quarantines(tmp_path: Path) -> None:
    plan = load_plan(
        write(
            tmp_path,
            """
            quarantine = "off"
            release_after = 5
            [verify.lanes]
            lint = "ruff check ."
            [verify.lanes.unit]
            command = "pytest -q"
            junit = "build/unit.xml"
            subset = "pytest -q {tests}"
            allow_empty = true
            [[task]]
            id = "a"
            run = "true"
            files = ["a"]
            """,
        )
    )
    assert plan.verify is not None
    assert plan.verify.lanes == (("lint", "ruff check ."), ("unit", "pytest -q"))
    assert plan.verify.options_of("unit") == LaneOptions(
        junit="build/unit.xml", subset="pytest -q {tests}", allow_empty=True
    )
    assert plan.verify.options_of("lint") == LaneOptions()
    config = plan.verify_config(None)
    assert config is not None and (config.quarantine, config.release_after) == ("off", 5)
    # What a lane's report and allow_empty say is part of what its verdict means.
    assert config.fingerprint() != replace(config, options=()).fingerprint()
    assert VerifyConfig.from_dict(config.to_dict()).options == config.options


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ('[verify.lanes.unit]\ncommand = "pytest"\njunitxml = "x"\n', "unknown key `junitxml`"),
        ('[verify.lanes.unit]\njunit = "x.xml"\n', "`command` must be a non-empty command"),
        ('[verify.lanes.unit]\ncommand = "pytest"\nsubset = "pytest"\n', "`{tests}`"),
        ('[tests]\nquarantine = "sometimes"\n', '"auto", "off" or a list of test ids'),
        ("[tests]\nrelease_after = 0\n", "`release_after` must be at least 1"),
    ],
)
def test_bad_lane_tables_and_tests_tables_are_named(
    tmp_path: Path, text: str, fragment: str
) -> None:
    (tmp_path / "forge.toml").write_text(text)
    with pytest.raises(ForgeError) as caught:
        load_repo_config(tmp_path)
    assert fragment in str(caught.value)
