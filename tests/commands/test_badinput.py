"""A corpus of bad inputs, each through the real CLI: the contract's exit code, one
line on stderr starting `forge: ` that says what to do, no traceback, and nothing
changed on disk (forge's files, refs, the user's checkout, the worktrees)."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers.gitkit import git, run_forge

from forge.base import seal
from forge.base.files import plan_lock
from forge.base.liveness import Owner
from forge.errors import ForgeError
from forge.git.refs import integration_ref
from forge.git.repo import Repository, check_git_version, discover
from forge.plan.registry import record
from forge.run.state.run_state import RunState, Status, TaskState
from forge.run.state.store import StateStore
from forge.verify.records import VerifyRecord

SHELL_PLAN = """\
name = "p"
[[task]]
id = "a"
run = "echo a > a.txt"
files = ["a.txt"]
"""

PROMPT_PLAN = """\
name = "p"
agent = "claude"
[[task]]
id = "a"
prompt = "write a.txt"
files = ["a.txt"]
"""


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _record(repo: Path, text: str = SHELL_PLAN) -> Path:
    plan = _write(repo.parent / "plans" / "p.toml", text)
    record(_forge_repo(repo), plan)  # in-process: as `forge plan` does, faster
    return plan


def _forge_repo(repo: Path) -> Repository:
    return discover(repo)


def _craft_state(repo: Path, *, status: Status = Status.MERGED, verdict: str | None = None) -> str:
    """A state in which task `a` reached `status`, its work (a.txt) on integration,
    and (if `verdict`) a verification record of the integration head."""
    r = _forge_repo(repo)
    base = git(repo, "rev-parse", "HEAD")
    tree_in = git(repo, "ls-tree", "HEAD") + "\n"
    obj = r.git("hash-object", "-w", "--stdin", input="a\n").strip()
    tree = r.git("mktree", input=tree_in + f"100644 blob {obj}\ta.txt\n").strip()
    head = r.git("commit-tree", tree, "-p", base, "-m", "forge: merge p/a (attempt 1)").strip()
    r.update_ref(integration_ref("p"), head, None, message="test")
    st = RunState(plan="p", integration=integration_ref("p"), tasks={"a": TaskState(id="a")})
    st.tasks["a"].status = status
    if verdict is not None:
        st.verification = VerifyRecord.from_dict({"verdict": verdict, "commit": head})
    StateStore(r.state, "p").save(st)
    return head


# -- the snapshot of everything a refused command must leave alone --------------


def snapshot(root: Path) -> dict[str, object]:
    snap: dict[str, object] = {}
    for base in (root, Path(os.environ["FORGE_WORKTREES"])):
        files = {}
        for dirpath, _dirs, names in os.walk(base):
            for name in names:
                p = Path(dirpath) / name
                rel = str(p.relative_to(base))
                if rel.endswith((".lock", "/index")) or rel == ".git/index":
                    # lock files are kept by design; the index is stat-refreshed by
                    # `git status` itself (its bytes are compared through status below)
                    files[rel] = "present"
                    continue
                try:
                    files[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
                except OSError:
                    files[rel] = "unreadable"
        snap[str(base)] = files
    if (root / ".git").exists() or (root / "HEAD").exists():
        snap["refs"] = git(root, "for-each-ref", "--format=%(refname) %(objectname)")
        snap["head"] = git(root, "rev-parse", "--symbolic-full-name", "HEAD")
        if (root / ".git").exists():
            snap["status"] = git(root, "status", "--porcelain", "--untracked-files=all")
    return snap


def changes(before: dict[str, object], after: dict[str, object]) -> list[str]:
    out = []
    for key in sorted(set(before) | set(after)):
        b, a = before.get(key), after.get(key)
        if isinstance(b, dict) and isinstance(a, dict):
            out += [f"{key}/{k}" for k in sorted(set(b) | set(a)) if b.get(k) != a.get(k)]
        elif b != a:
            out.append(f"{key}: {b!r} -> {a!r}")
    return out


@dataclass(frozen=True)
class Case:
    """`setup` prepares the repository (or a folder) and returns (cwd, argv)."""

    setup: Callable[[Path], tuple[Path, list[str]]]
    expect: tuple[str, ...]  # substrings of the message (case-insensitive)
    code: int = 2
    lines: int = 1  # stderr lines: one problem, one line


def _not_a_repo(repo: Path) -> tuple[Path, list[str]]:
    d = repo.parent / "plain"
    d.mkdir()
    return d, ["status"]


def _bare(repo: Path) -> tuple[Path, list[str]]:
    d = repo.parent / "bare.git"
    git(repo.parent, "init", "-q", "--bare", str(d))
    return d, ["status"]


def _detached_accept(repo: Path) -> tuple[Path, list[str]]:
    _record(repo)
    _craft_state(repo, verdict="PASS")
    git(repo, "checkout", "-q", "--detach")
    return repo, ["accept"]


def _plan_file(text: str) -> Callable[[Path], tuple[Path, list[str]]]:
    def setup(repo: Path) -> tuple[Path, list[str]]:
        plan = _write(repo.parent / "plans" / "p.toml", text)
        return repo, ["plan", str(plan)]

    return setup


def _task(extra: str, *, tid: str = "a", files: str = '["a.txt"]') -> str:
    return f'name = "p"\n[[task]]\nid = "{tid}"\nrun = "true"\nfiles = {files}\n{extra}'


def _missing_plan(repo: Path) -> tuple[Path, list[str]]:
    return repo, ["plan", str(repo.parent / "nope.toml")]


def _retry(task: str, *extra: str, plan: str = PROMPT_PLAN, merged: bool = False):  # type: ignore[no-untyped-def]
    def setup(repo: Path) -> tuple[Path, list[str]]:
        _record(repo, plan)
        if merged:
            _craft_state(repo)
        return repo, ["retry", task, *extra]

    return setup


def _accept_unverified(repo: Path) -> tuple[Path, list[str]]:
    _record(repo)
    _craft_state(repo)
    return repo, ["accept"]


def _accept_in_the_way(repo: Path) -> tuple[Path, list[str]]:
    _record(repo)
    _craft_state(repo, verdict="PASS")
    (repo / "a.txt").write_text("my own work\n")  # untracked: the fast-forward would overwrite it
    return repo, ["accept"]


def _changed_plan(repo: Path) -> tuple[Path, list[str]]:
    plan = _record(repo)
    plan.write_text(plan.read_text() + "# edited\n")
    return repo, ["run"]


def _corrupt(which: str, command: str) -> Callable[[Path], tuple[Path, list[str]]]:
    def setup(repo: Path) -> tuple[Path, list[str]]:
        _record(repo)
        if which == "state.json":
            _craft_state(repo, status=Status.FAILED)
        (repo / ".git/forge/plans/p" / which).write_text('{"plan": "p", "tasks": {')
        return repo, [command]

    return setup


def _wrong_shape(which: str, text: str, command: str) -> Callable[[Path], tuple[Path, list[str]]]:
    """Valid JSON of the wrong shape in a state file."""

    def setup(repo: Path) -> tuple[Path, list[str]]:
        _record(repo)
        if which == "state.json":
            _craft_state(repo, status=Status.FAILED)
        (repo / ".git/forge/plans/p" / which).write_text(text)
        return repo, [command]

    return setup


def _wrong_shape_record(repo: Path) -> tuple[Path, list[str]]:
    """A remembered verdict whose record says `{"verdict": 5}`."""
    from forge.plan.repo_config import load_repo_config

    _write(repo / "forge.toml", '[verify]\ncommand = "true"\n')
    config = load_repo_config(repo).verify
    assert config is not None
    tree = git(repo, "rev-parse", "HEAD^{tree}")
    verify = repo / ".git/forge/verify"
    # The entry is forge's own (sealed); the record it names is of the wrong shape.
    entry = json.dumps(seal.sealed({"record": "r1"}))
    _write(verify / "cache" / f"{tree}-{config.fingerprint()}.json", entry + "\n")
    _write(
        verify / "records" / "r1.json",
        json.dumps({"id": "r1", "commit": "c", "tree": tree, "verdict": 5}),
    )
    return repo, ["verify"]


def _unknown_agent_run(repo: Path) -> tuple[Path, list[str]]:
    # Recorded while forge.toml defined the agent; the definition is gone since.
    toml = repo / "forge.toml"
    toml.write_text('[agents.nosuchagent]\ncommand = ["true"]\n')
    _record(repo, PROMPT_PLAN.replace('agent = "claude"', 'agent = "nosuchagent"'))
    toml.unlink()
    return repo, ["run"]


def _no_plan(command: str) -> Callable[[Path], tuple[Path, list[str]]]:
    return lambda repo: (repo, [command])


def _status_unknown(repo: Path) -> tuple[Path, list[str]]:
    _record(repo)
    return repo, ["status", "--plan", "nosuch"]


def _clean_unknown(repo: Path) -> tuple[Path, list[str]]:
    _record(repo)
    return repo, ["clean", "nosuch"]


def _empty_hold(repo: Path) -> tuple[Path, list[str]]:
    return repo, ["hold", "--reason", "  "]


CASES: dict[str, Case] = {
    "not-a-repository": Case(_not_a_repo, ("not in a git repository", "git init")),
    "bare-repository": Case(_bare, ("bare", "working tree")),
    "detached-head-accept": Case(_detached_accept, ("detached", "check out")),
    "unknown-base": Case(
        _plan_file(_task("").replace('name = "p"', 'name = "p"\nbase = "nosuch"')), ("nosuch",)
    ),
    "missing-plan-file": Case(_missing_plan, ("nope.toml", "not found")),
    "toml-error": Case(_plan_file('name = "p"\n[[task]\n'), ("toml", "line")),
    "unknown-key": Case(_plan_file(_task('colour = "red"\n')), ("colour",)),
    "cycle": Case(
        _plan_file(
            'name = "p"\n[[task]]\nid = "a"\nrun = "true"\nfiles = ["a"]\ndeps = ["b"]\n'
            '[[task]]\nid = "b"\nrun = "true"\nfiles = ["b"]\ndeps = ["a"]\n'
        ),
        ("cycle", "a -> b -> a"),
    ),
    "unknown-dependency": Case(_plan_file(_task('deps = ["ghost"]\n')), ("ghost",)),
    "duplicate-ids": Case(
        _plan_file(_task("") + '[[task]]\nid = "a"\nrun = "true"\nfiles = ["b"]\n'),
        ("duplicate", "a"),
    ),
    "id-not-valid-in-a-ref": Case(_plan_file(_task("", tid="a..b")), ("a..b", "not valid")),
    "absolute-path": Case(_plan_file(_task("", files='["/etc/passwd"]')), ("/etc/passwd",)),
    "dotdot-path": Case(_plan_file(_task("", files='["../escape.txt"]')), ("../escape.txt",)),
    "no-prompt-nor-run": Case(
        _plan_file('name = "p"\n[[task]]\nid = "a"\nfiles = ["a"]\n'), ("prompt", "run")
    ),
    "no-files": Case(_plan_file('name = "p"\n[[task]]\nid = "a"\nrun = "true"\n'), ("files",)),
    "unknown-agent": Case(
        _plan_file(
            'name = "p"\nagent = "nosuchagent"\n[[task]]\nid = "a"\nprompt = "x"\nfiles = ["a"]\n'
        ),
        ("nosuchagent",),
    ),
    "unknown-agent-run": Case(_unknown_agent_run, ("nosuchagent", "forge.toml")),
    "unknown-model": Case(_retry("a", "--agent", "claude:nosuch"), ("nosuch",)),
    "unknown-effort": Case(_retry("a", "--agent", "claude:sonnet:nosuch"), ("nosuch",)),
    "retry-unknown-task": Case(_retry("ghost"), ("ghost", "tasks: a")),
    "retry-merged-task": Case(_retry("a", plan=SHELL_PLAN, merged=True), ("already merged",)),
    "accept-unverified": Case(_accept_unverified, ("not passed verification", "forge run")),
    "accept-local-changes": Case(_accept_in_the_way, ("refused", "a.txt")),
    "changed-plan-file": Case(_changed_plan, ("changed since it was recorded", "forge plan")),
    "corrupt-state-run": Case(
        _corrupt("state.json", "run"), ("state.json", "corrupt", "move it aside")
    ),
    "corrupt-state-status": Case(_corrupt("state.json", "status"), ("state.json", "corrupt")),
    "corrupt-plan-json": Case(_corrupt("plan.json", "run"), ("plan.json", "corrupt", "forge plan")),
    **{
        f"wrong-shape-state-{label}-{command}": Case(
            _wrong_shape("state.json", text, command), ("state.json", "unexpected shape")
        )
        for label, text in {
            "empty-object": "{}",
            "list": "[]",
            "null": "null",
            "schema-key": '{"schema": 999}',
            "schema-version-string": '{"schema_version": "1"}',
            "tasks-list": '{"plan": "p", "integration": "x", "tasks": []}',
            "unknown-status": '{"plan": "p", "integration": "x", "tasks": '
            '{"a": {"id": "a", "status": "WEIRD"}}}',
            "attempt-number": '{"plan": "p", "integration": "x", "tasks": '
            '{"a": {"id": "a", "attempts": [5]}}}',
            "verdict-number": '{"plan": "p", "integration": "x", "tasks": {}, '
            '"verification": {"verdict": 5}}',
        }.items()
        for command in ("run", "status")
    },
    "wrong-shape-plan-json": Case(
        _wrong_shape("plan.json", "[]", "status"), ("plan.json", "forge plan")
    ),
    "wrong-shape-verification-record": Case(
        _wrong_shape_record, ("r1.json", "unexpected shape", "verdict")
    ),
    "run-no-plan": Case(_no_plan("run"), ("no plan recorded", "forge plan")),
    "status-unknown-plan": Case(_status_unknown, ("nosuch",)),
    "clean-unknown-plan": Case(_clean_unknown, ("nosuch",)),
    "hold-without-reason": Case(_empty_hold, ("reason",)),
}

KNOWN_BUGS: dict[str, str] = {}


def _params() -> list[object]:
    out: list[object] = []
    for name, case in CASES.items():
        marks = []
        if name in KNOWN_BUGS:
            marks.append(pytest.mark.xfail(reason=KNOWN_BUGS[name], strict=True))
        out.append(pytest.param(case, id=name, marks=marks))
    return out


@pytest.mark.parametrize("case", _params())
def test_bad_input_is_refused_cleanly(case: Case, repo: Path) -> None:
    cwd, argv = case.setup(repo)
    before = snapshot(cwd)
    cp = run_forge(cwd, *argv)
    after = snapshot(cwd)
    err = cp.stderr
    assert cp.returncode == case.code, f"exit {cp.returncode}\n{cp.stdout}\n{err}"
    assert "Traceback" not in err + cp.stdout
    lines = err.splitlines()
    assert len(lines) == case.lines, err
    assert all(line.startswith("forge: ") for line in lines), err
    for want in case.expect:
        assert want.lower() in err.lower(), f"{want!r} not in {err!r}"
    assert after == before, f"a refused command changed something on disk: {changes(before, after)}"


def test_old_git_is_named_with_the_version_needed() -> None:
    with pytest.raises(ForgeError) as info:
        check_git_version((2, 30))
    assert "2.38" in str(info.value) and "2.30" in str(info.value)
    check_git_version((2, 38))  # the oldest git that has merge-tree --write-tree


def test_a_second_runner_names_the_holder_and_changes_nothing(repo: Path) -> None:
    _record(repo)
    r = _forge_repo(repo)
    with plan_lock(r.state, "p", command="forge test-holder") as me:
        before = snapshot(repo)
        cp = run_forge(repo, "run")
        after = snapshot(repo)
    assert me == Owner.me("forge test-holder")
    assert cp.returncode == 2, cp.stdout + cp.stderr
    assert cp.stderr.splitlines() == [cp.stderr.strip()]
    assert f"pid {os.getpid()}" in cp.stderr and "test-holder" in cp.stderr
    assert "busy" in cp.stderr and "Traceback" not in cp.stderr
    assert after == before, changes(before, after)


def test_corrupt_state_is_named_and_never_overwritten(repo: Path) -> None:
    _record(repo)
    path = repo / ".git/forge/plans/p/state.json"
    path.write_bytes(b'{"plan": "p", "tasks": {\x00garbage')
    raw = path.read_bytes()
    for argv in (["run"], ["status"], ["retry", "a"], ["clean"], ["accept"]):
        cp = run_forge(repo, *argv)
        assert cp.returncode == 2, (argv, cp.stdout, cp.stderr)
        assert str(path) in cp.stderr, (argv, cp.stderr)
        assert "Traceback" not in cp.stderr
        assert path.read_bytes() == raw, f"`forge {' '.join(argv)}` overwrote the corrupt file"


@pytest.mark.parametrize(
    ("var", "value"),
    [("FORGE_GRACE", "soon"), ("FORGE_INFRA_BACKOFF", "-1"), ("FORGE_GRACE", "nan")],
)
@pytest.mark.parametrize("command", ["run", "status"])
def test_a_bad_setting_in_the_environment_is_one_line(
    repo: Path, monkeypatch: pytest.MonkeyPatch, var: str, value: str, command: str
) -> None:
    _record(repo)
    monkeypatch.setenv(var, value)
    before = snapshot(repo)
    cp = run_forge(repo, command)
    assert cp.returncode == 2, cp.stdout + cp.stderr
    assert cp.stderr.splitlines() == [cp.stderr.strip()]
    assert cp.stderr.startswith(f"forge: {var}=") and "Traceback" not in cp.stderr
    assert snapshot(repo) == before
