"""`forge plan` through the real CLI: recording, --check, --json, refusals, and
plan resolution for the other commands."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from helpers.gitkit import commit_all, git, run_forge

from forge.errors import ForgeError
from forge.git.repo import discover
from forge.plan.registry import Recorded, record, resolve

PLAN = """\
name = "demo"
[[task]]
id = "api"
prompt = "Build the API"
files = ["src/app/"]

[[task]]
id = "model"
prompt = "Add the model"
files = ["src/app/model.py"]

[[task]]
id = "docs"
run = "echo docs > docs.md"
files = ["docs.md"]
deps = ["api"]
"""


def forge_files(repo: Path) -> list[Path]:
    root = repo / ".git" / "forge"
    return sorted(p for p in root.rglob("*")) if root.exists() else []


def write_plan(repo: Path, text: str = PLAN, name: str = "demo.toml") -> Path:
    path = repo / "plans" / name
    path.parent.mkdir(exist_ok=True)
    path.write_text(text)
    return path


def test_plan_records_and_prints_the_wave_table(repo: Path) -> None:
    write_plan(repo)
    cp = run_forge(repo, "plan", "plans/demo.toml")
    assert cp.returncode == 0, cp.stderr
    lines = cp.stdout.splitlines()
    assert lines[0].split() == ["wave", "task", "kind", "deps", "files", "note"]
    rows = {line.split()[1]: line for line in lines[2:] if line[:1].isdigit()}
    assert rows["api"].split()[0] == "1" and rows["docs"].split()[0] == "2"
    assert rows["model"].split()[0] == "2"
    assert "deferred: overlaps `api` on src/app/model.py" in rows["model"]
    assert "recorded plan 'demo'" in cp.stdout
    head = git(repo, "rev-parse", "HEAD")
    data = json.loads((repo / ".git/forge/plans/demo/plan.json").read_text())
    assert data["schema_version"] == 1
    assert data["base_commit"] == head and data["base_ref"] == "main"
    assert data["waves"] == [["api"], ["model", "docs"]]
    assert data["source_path"] == str((repo / "plans/demo.toml").resolve())
    rec = Recorded.from_dict(data)
    assert rec.to_dict() == data
    # the user's working tree is untouched
    assert git(repo, "status", "--porcelain") == "?? plans/"


def test_plan_json(repo: Path) -> None:
    write_plan(repo)
    cp = run_forge(repo, "plan", "--json", "plans/demo.toml")
    assert cp.returncode == 0, cp.stderr
    data = json.loads(cp.stdout)
    assert data["plan"] == "demo" and data["recorded"] is True
    assert data["waves"] == [["api"], ["model", "docs"]]
    tasks = {t["id"]: t for t in data["tasks"]}
    assert tasks["model"]["deferral"] == "deferred: overlaps `api` on src/app/model.py"
    assert tasks["model"]["wave"] == 2 and tasks["api"]["critical_path"] == 2
    assert tasks["docs"]["kind"] == "shell"
    assert Path(data["record_file"]).is_file()


def test_check_writes_nothing(repo: Path) -> None:
    write_plan(repo)
    cp = run_forge(repo, "plan", "--check", "plans/demo.toml")
    assert cp.returncode == 0, cp.stderr
    assert "is valid" in cp.stdout and "nothing recorded" in cp.stdout
    assert forge_files(repo) == []
    cp = run_forge(repo, "plan", "--check", "--json", "plans/demo.toml")
    assert json.loads(cp.stdout)["recorded"] is False
    assert forge_files(repo) == []


def test_check_needs_no_repository(tmp_path: Path) -> None:
    path = tmp_path / "demo.toml"
    path.write_text(PLAN)
    cp = run_forge(tmp_path, "plan", "--check", str(path))
    assert cp.returncode == 0, cp.stderr


def test_check_rejects_an_agent_plan_rejects(repo: Path, tmp_path: Path) -> None:
    bad = 'name = "p1"\nagent = "claude:gpt-4"\n[[task]]\nid = "a"\nprompt = "do it"\nfiles = ["a.txt"]\n'
    write_plan(repo, bad, "p1.toml")
    cp = run_forge(repo, "plan", "--check", "plans/p1.toml")
    assert cp.returncode == 2, cp.stdout
    assert "task 'a': agent 'claude:gpt-4'" in cp.stderr
    assert forge_files(repo) == []
    # The agents of forge.toml count, as they do for `forge plan`.
    (repo / "forge.toml").write_text('[agents.mine]\ncommand = ["my-agent", "{prompt_file}"]\n')
    write_plan(repo, bad.replace("claude:gpt-4", "mine"), "p1.toml")
    cp = run_forge(repo, "plan", "--check", "plans/p1.toml")
    assert cp.returncode == 0, cp.stderr
    # Outside a repository only the presets and the plan's own agents are known.
    outside = tmp_path / "p1.toml"
    outside.write_text(bad.replace("claude:gpt-4", "mine"))
    cp = run_forge(tmp_path, "plan", "--check", str(outside))
    assert cp.returncode == 2 and "agent 'mine'" in cp.stderr


def test_check_and_plan_agree_on_a_broken_forge_toml(repo: Path) -> None:
    """`forge plan --check` must not say valid for a plan `forge plan` refuses."""
    write_plan(repo, PLAN, "demo.toml")
    (repo / "forge.toml").write_text("[agents.mine\ncommand = 1\n")
    checked = run_forge(repo, "plan", "--check", "plans/demo.toml")
    recorded = run_forge(repo, "plan", "plans/demo.toml")
    assert recorded.returncode == 2, recorded.stdout
    assert checked.returncode == recorded.returncode, checked.stdout
    assert "forge.toml" in checked.stderr
    assert checked.stderr == recorded.stderr
    assert forge_files(repo) == []


INVALID = {
    "unknown key": (
        '[[task]]\nid = "a"\nrun = "x"\nfiles = ["a"]\ndepends = ["b"]\n',
        ":5: task `a`: unknown key `depends` (did you mean `deps`?)",
    ),
    "duplicate": (
        '[[task]]\nid = "a"\nrun = "x"\nfiles = ["a"]\n[[task]]\nid = "a"\nrun = "y"\nfiles = ["b"]\n',
        ":5: task `a`: duplicate id",
    ),
    "bad id": (
        '[[task]]\nid = "a/b"\nrun = "x"\nfiles = ["a"]\n',
        ":2: task `a/b`: id is not valid",
    ),
    "unknown dep": (
        '[[task]]\nid = "a"\nrun = "x"\nfiles = ["a"]\ndeps = ["zz"]\n',
        ":5: task `a`: unknown dependency `zz`",
    ),
    "cycle": (
        '[[task]]\nid = "a"\nrun = "x"\nfiles = ["a"]\ndeps = ["b"]\n[[task]]\nid = "b"\nrun = "x"\nfiles = ["b"]\ndeps = ["a"]\n',
        ":1: dependency cycle: a -> b -> a",
    ),
    "neither": ('[[task]]\nid = "a"\nfiles = ["a"]\n', ":1: task `a`: needs `prompt`"),
    "both": (
        '[[task]]\nid = "a"\nrun = "x"\nprompt = "y"\nfiles = ["a"]\n',
        "task `a`: has both `prompt` and `run`",
    ),
    "no files": ('[[task]]\nid = "a"\nrun = "x"\n', ":1: task `a`: missing `files`"),
    "absolute": (
        '[[task]]\nid = "a"\nrun = "x"\nfiles = ["/a"]\n',
        ":4: task `a`: `files` entry '/a' is absolute",
    ),
    "dotdot": (
        '[[task]]\nid = "a"\nrun = "x"\nfiles = ["../a"]\n',
        ":4: task `a`: `files` entry '../a' contains `..`",
    ),
    "max_parallel": (
        'max_parallel = 0\n[[task]]\nid = "a"\nrun = "x"\nfiles = ["a"]\n',
        ":1: `max_parallel` must be at least 1",
    ),
    "syntax": ('[[task]]\nid = "a\n', ":2: TOML syntax error"),
    "name": (
        'name = "x-integration"\n[[task]]\nid = "a"\nrun = "x"\nfiles = ["a"]\n',
        ":1: plan name `x-integration` is not valid",
    ),
}


@pytest.mark.parametrize("case", sorted(INVALID))
def test_invalid_plan_exits_2_and_writes_nothing(repo: Path, case: str) -> None:
    text, fragment = INVALID[case]
    write_plan(repo, 'name = "demo"\n' + text if "name =" not in text else text)
    cp = run_forge(repo, "plan", "plans/demo.toml")
    assert cp.returncode == 2, (cp.stdout, cp.stderr)
    assert "Traceback" not in cp.stderr
    lines = cp.stderr.splitlines()
    assert all(line.startswith("forge: plans/demo.toml") for line in lines), lines
    shifted = fragment if "name =" in text else _shift(fragment)
    assert any(shifted in line for line in lines), (shifted, lines)
    assert cp.stdout == ""
    assert forge_files(repo) == []


def _shift(fragment: str) -> str:
    """The tests above prepend a `name` line: move `:N:` down by one."""
    if fragment.startswith(":"):
        line, rest = fragment[1:].split(":", 1)
        return f":{int(line) + 1}:{rest}"
    return fragment


def test_missing_plan_file(repo: Path) -> None:
    cp = run_forge(repo, "plan", "nope.toml")
    assert cp.returncode == 2
    assert cp.stderr == "forge: plan file nope.toml not found\n"
    assert forge_files(repo) == []


def test_invalid_replan_keeps_the_old_record(repo: Path) -> None:
    path = write_plan(repo)
    assert run_forge(repo, "plan", "plans/demo.toml").returncode == 0
    record_file = repo / ".git/forge/plans/demo/plan.json"
    before = record_file.read_bytes()
    path.write_text(PLAN + '\n[[task]]\nid = "late"\nrun = "x"\nfiles = ["l"]\ndeps = ["late"]\n')
    cp = run_forge(repo, "plan", "plans/demo.toml")
    assert cp.returncode == 2 and "dependency cycle: late -> late" in cp.stderr
    assert record_file.read_bytes() == before
    # the old record is still usable by name, but its changed file is pointed out
    with pytest.raises(ForgeError, match="changed since it was recorded; run `forge plan"):
        resolve(discover(repo), "demo")
    path.write_text(PLAN)
    assert resolve(discover(repo), "demo").plan.task_ids == ("api", "model", "docs")


def test_plan_from_a_subfolder_and_a_linked_worktree(repo: Path, tmp_path: Path) -> None:
    write_plan(repo)
    commit_all(repo, "plans")
    sub = repo / "src"
    cp = run_forge(sub, "plan", "../plans/demo.toml")
    assert cp.returncode == 0, cp.stderr
    assert (repo / ".git/forge/plans/demo/plan.json").is_file()

    wt = tmp_path / "wt"
    git(repo, "worktree", "add", "-q", "-b", "side", str(wt))
    (wt / "plans" / "demo.toml").write_text(PLAN.replace('"demo"', '"side"'))
    git(wt, "commit", "-q", "-am", "side plan")
    cp = run_forge(wt / "plans", "plan", "demo.toml")
    assert cp.returncode == 0, cp.stderr
    # recorded under the common git dir, with the worktree's own HEAD as its base
    data = json.loads((repo / ".git/forge/plans/side/plan.json").read_text())
    assert data["base_ref"] == "side" and data["base_commit"] == git(wt, "rev-parse", "HEAD")
    assert not (wt / ".git").is_dir()


def test_base_must_exist(repo: Path) -> None:
    write_plan(repo, 'base = "nope"\n' + PLAN)
    cp = run_forge(repo, "plan", "plans/demo.toml")
    assert cp.returncode == 2 and "unknown revision 'nope'" in cp.stderr
    assert forge_files(repo) == []


def test_colliding_branch_is_refused(repo: Path) -> None:
    write_plan(repo)
    git(repo, "branch", "forge/demo")
    cp = run_forge(repo, "plan", "plans/demo.toml")
    assert cp.returncode == 2 and "a branch named `forge/demo` exists" in cp.stderr
    assert forge_files(repo) == []


def test_outside_a_repository(tmp_path: Path) -> None:
    path = tmp_path / "demo.toml"
    path.write_text(PLAN)
    cp = run_forge(tmp_path, "plan", "demo.toml")
    assert cp.returncode == 2 and "not in a git repository" in cp.stderr


# --- resolve (in process; used by run, status, accept, ...) -------------------------


def test_resolve(repo: Path) -> None:
    r = discover(repo)
    with pytest.raises(ForgeError, match=r"no plan recorded; run `forge plan PLAN\.toml` first"):
        resolve(r, None)
    path = write_plan(repo)
    other = write_plan(repo, PLAN.replace('"demo"', '"other"'), "other.toml")
    record(r, path)
    assert resolve(r, None).name == "demo"
    assert resolve(r, "demo").name == "demo"
    assert resolve(r, str(path)).name == "demo"
    assert resolve(r, "demo.toml", cwd=repo / "plans").name == "demo"
    with pytest.raises(
        ForgeError, match=r"plan file .*other.toml is not recorded; run `forge plan"
    ):
        resolve(r, str(other))
    record(r, other)
    with pytest.raises(ForgeError, match=r"several plans are recorded \(demo, other\)"):
        resolve(r, None)
    with pytest.raises(
        ForgeError, match=r"no plan named 'ghost' is recorded \(recorded: demo, other\)"
    ):
        resolve(r, "ghost")
    # a source file that is gone leaves the recorded copy usable
    other.unlink()
    assert resolve(r, "other").name == "other"


def test_record_refuses_while_another_command_holds_the_plan(repo: Path) -> None:
    """A `forge clean` (or `forge verify`) holds the plan's run lock: a re-plan must
    not change the plan underneath it. (A running `forge run` takes a new version up:
    tests/run/state/test_replan.py.)"""
    import sys

    from forge.base.files import StateDir

    path = write_plan(repo)
    r = discover(repo)
    state = StateDir.for_common_dir(r.common_dir)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, pathlib;"
            "from forge.base.files import StateDir, plan_lock;"
            f"s = StateDir(pathlib.Path({str(state.root)!r}));"
            "cm = plan_lock(s, 'demo', command='forge clean');"
            "cm.__enter__(); print('held', flush=True); sys.stdin.read()",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        cp = run_forge(repo, "plan", "plans/demo.toml")
        assert cp.returncode == 2 and "plan 'demo' is busy" in cp.stderr
        assert not state.plan_file("demo").exists()
    finally:
        holder.communicate("")
    record(r, path)
    assert state.plan_file("demo").is_file()


def _resolve_error(repo: Path, ref: str | None) -> str:
    with pytest.raises(ForgeError) as err:
        resolve(discover(repo), ref)
    return err.value.message


@pytest.mark.parametrize("command", ["status", "accept", "clean", "verify"])
def test_every_command_names_plans_as_resolve_does(repo: Path, command: str) -> None:
    """The commands that take a plan say what `resolve` says, word for word: with no
    plan recorded, with several and none named, with an unknown name."""
    cases: list[tuple[list[str], str | None]] = [([command], None)]
    if command == "verify":  # without --plan it verifies HEAD
        cases = [([command, "--plan", "ghost"], "ghost")]
    for args, ref in cases:
        cp = run_forge(repo, *args)
        assert cp.returncode == 2 and cp.stderr == f"forge: {_resolve_error(repo, ref)}\n"
    record(discover(repo), write_plan(repo))
    record(discover(repo), write_plan(repo, PLAN.replace('"demo"', '"other"'), "other.toml"))
    # (clean, which can clean them all, says how)
    more = ", or give --all to clean every plan" if command == "clean" else ""
    for args, ref in cases:
        cp = run_forge(repo, *args)
        assert cp.returncode == 2 and cp.stderr == f"forge: {_resolve_error(repo, ref)}{more}\n"


MULTILINE = '''\
name = "ml"
[[task]]
id = "a"
files = ["a.txt"]
prompt = """
Write a plan for me, like this one:

[[task]]
id = "x"
timeout = "soon"
"""
run = "true"

[[task]]
id = "b"
files = ["b.txt"]
timeout = "whenever"
prompt = \'\'\'
[[task]]
\'\'\'
'''


def test_a_problem_is_at_its_line_whatever_a_multiline_prompt_holds(repo: Path) -> None:
    # Lines inside a multi-line string are text: the `[[task]]` and `timeout`
    # in a's prompt are neither a table header nor a key of task b's.
    path = write_plan(repo, MULTILINE, name="ml.toml")
    cp = run_forge(repo, "plan", "plans/ml.toml")
    assert cp.returncode == 2, cp.stderr
    lines = cp.stderr.splitlines()
    assert any("ml.toml:17: task `b`: `timeout`" in ln for ln in lines), cp.stderr
    assert any("ml.toml:12: task `a`" in ln and "both" in ln for ln in lines), cp.stderr
    assert str(path) not in cp.stdout
