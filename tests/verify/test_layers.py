"""What one verification writes is never seen by the next: with layers (a fresh
upper layer each run over read-only base and setup layers) and with the checkouts
forge falls back to (`FORGE_LAYERS=off`). Each test runs both ways."""

from __future__ import annotations

import os
import shlex
import signal
import sys
from pathlib import Path

import pytest
from helpers.gitkit import commit_all, git, run_forge
from helpers.runkit import alive as running

from forge.base import sandbox
from forge.git.repo import Repository, discover
from forge.layers import mode as layer_mode
from forge.layers.store import kind_dir, store_dir
from forge.plan.repo_config import VerifyConfig
from forge.run.state.folders import repository_use
from forge.verify.engine import Ask, Verdict, verify_commit

# The interpreter itself, not a virtualenv's link to it: a virtualenv under /tmp
# (a clone checked there) is covered by the sandbox's private /tmp.
PY = shlex.quote(os.path.realpath(sys.executable))
# setup's environment: a module the lanes import from `.venv`
SETUP = "mkdir -p .venv && printf 'def ok():\\n    return True\\n' > .venv/helper.py"
CHECK = f"{PY} -c \"import sys; sys.path.insert(0, '.venv'); import helper; sys.exit(0 if helper.ok() else 7)\""
# bytecode of a helper whose ok() is False, that Python never checks against the source
PLANT = (
    f"{PY} -c \"import py_compile, pathlib; p = pathlib.Path('bad.py'); "
    "p.write_text('def ok():\\n    return False\\n'); "
    "py_compile.compile('bad.py', cfile=__import__('importlib.util').util.cache_from_source("
    "'.venv/helper.py'), invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH); "
    'p.unlink()"'
)


@pytest.fixture(params=["on", "off"], autouse=True)
def layers(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """FORGE_LAYERS both ways (on: where an overlay can be mounted here)."""
    value = str(request.param)
    monkeypatch.setenv(layer_mode.MODE_VAR, value)
    if value == "on":
        found = layer_mode.choose(Path("/tmp"))
        if not found.layers:
            pytest.skip(found.why)
    return value


@pytest.fixture
def r(repo: Path) -> Repository:
    (repo / ".gitignore").write_text(".venv/\n*.cache\n")
    (repo / "requirements.txt").write_text("helper==1\n")
    commit_all(repo, "ignore, requirements")
    return discover(repo)


def cfg(lane: str, *, setup: str | None = SETUP) -> VerifyConfig:
    return VerifyConfig(lanes=(("unit", lane),), reruns=0, grace=0.5, setup=setup)


def another_tree(r: Repository, name: str = "README.md") -> None:
    (r.root / name).write_text((r.root / name).read_text() + "more\n")
    commit_all(r.root, f"edit {name}")


@pytest.mark.parametrize("boxed", [False, True], ids=["plain", "sandbox"])
def test_a_planted_pyc_changes_no_later_verdict(r: Repository, boxed: bool) -> None:
    if boxed and sandbox.unavailable():
        pytest.skip(str(sandbox.unavailable()))
    ask = Ask(sandbox=boxed)
    first = verify_commit(r, "HEAD", cfg(f"{CHECK} && {PLANT}"), key="k", ask=ask)
    assert first.verdict == Verdict.PASS, [lane.lines() for lane in first.lanes]
    another_tree(r)  # same setup inputs: the same setup (layer, or checkout's .venv)
    later = verify_commit(r, "HEAD", cfg(CHECK), key="k", ask=ask)
    assert later.verdict == Verdict.PASS, [lane.lines() for lane in later.lanes]


def test_what_a_run_writes_is_absent_in_the_next(r: Repository) -> None:
    wrote = "mkdir -p src/.git .venv && echo x > src/.git/config && echo x > .venv/x.pth"
    wrote += " && echo x > build.cache"
    assert verify_commit(r, "HEAD", cfg(wrote), key="k").verdict == Verdict.PASS
    another_tree(r)
    look = "test ! -e src/.git && test ! -e .venv/x.pth && test ! -e build.cache"
    rec = verify_commit(r, "HEAD", cfg(look), key="k")
    assert rec.verdict == Verdict.PASS, [lane.lines() for lane in rec.lanes]


def test_setup_runs_once_per_setup_inputs(r: Repository, layers: str, tmp_path: Path) -> None:
    setups = tmp_path / "setups"
    config = cfg(CHECK, setup=f"{SETUP} && echo ran >> {setups}")
    assert verify_commit(r, "HEAD", config, key="k").verdict == Verdict.PASS
    another_tree(r)
    assert verify_commit(r, "HEAD", config, key="k").verdict == Verdict.PASS
    assert setups.read_text() == "ran\n"  # the same lock file: the same setup
    another_tree(r, "requirements.txt")  # a candidate whose setup inputs differ
    ask = Ask(candidate=True)
    assert verify_commit(r, "HEAD", config, key="k", ask=ask).verdict == Verdict.PASS
    r.git("reset", "-q", "--hard", "HEAD~1")
    again = verify_commit(r, "HEAD", config, key="k", ask=Ask(force=True))
    assert again.verdict == Verdict.PASS
    if layers == "on":
        # the candidate's setup layer was its own, discarded after: one shared
        assert setups.read_text() == "ran\nran\n"
        root = kind_dir(r, layer_mode.choose(store_dir(r)))
        assert len([p for p in (root / "setup").iterdir() if p.is_dir()]) == 1
        assert not list((root / "runs").iterdir())  # no upper layer outlives its run
    else:  # checkouts run setup again only when the setup or the env change
        assert setups.read_text() == "ran\n"


@pytest.mark.parametrize(
    ("setup", "named"),
    [("echo x >> README.md", "README.md"), ("rm src/app.py", "src/app.py")],
    ids=["writes", "deletes"],
)
def test_a_setup_that_touches_a_tracked_path_fails_naming_it(
    r: Repository, setup: str, named: str
) -> None:
    rec = verify_commit(r, "HEAD", cfg("true", setup=setup), key="k")
    assert rec.verdict == Verdict.FAIL
    assert (
        rec.lanes[0].reason
        == f"setup failed in its checkout: wrote or deleted paths git does not ignore: {named}"
    )


def test_a_lane_that_edits_the_tree_fails_and_the_next_sees_the_tree(r: Repository) -> None:
    edit = "echo changed >> README.md && rm src/app.py && echo new > new.txt && echo x > a.cache"
    rec = verify_commit(r, "HEAD", cfg(edit, setup=None), key="k")
    assert rec.verdict == Verdict.FAIL
    assert rec.lanes[0].runs[0].changed == ("README.md", "new.txt", "src/app.py")
    another_tree(r, "src/app.py")
    look = "grep -qx more src/app.py && test ! -e new.txt && test ! -e a.cache && git diff --quiet HEAD"
    again = verify_commit(r, "HEAD", cfg(look, setup=None), key="k")
    assert again.verdict == Verdict.PASS, [lane.lines() for lane in again.lanes]


def test_a_daemon_a_run_leaves_behind_never_reaches_the_next(
    r: Repository, layers: str, tmp_path: Path
) -> None:
    if layers == "off":
        pytest.skip(
            "a checkout is the next run's too: a daemon that left it is ended only by a namespace"
        )
    pid_file, go = tmp_path / "daemon.pid", tmp_path / "go"
    loop = (
        f'cd /; echo $$ > {pid_file}; while :; do echo x > "$1/late.cache"; '
        f'if [ -e {go} ]; then echo broken > "$1/src/app.py"; fi; sleep 0.01; done'
    )
    lane = (
        f'setsid -f env -i PATH="$PATH" sh -c \'{loop}\' sh "$PWD"; '
        "while [ ! -e late.cache ]; do sleep 0.01; done"
    )
    assert verify_commit(r, "HEAD", cfg(lane, setup=None), key="k").verdict == Verdict.PASS
    daemon = int(pid_file.read_text())
    try:
        go.write_text("")  # it now rewrites a tracked file wherever it can
        another_tree(r)
        look = "grep -qx 'VALUE = 1' src/app.py && test ! -e late.cache"
        rec = verify_commit(r, "HEAD", cfg(look, setup=None), key="k")
        assert rec.verdict == Verdict.PASS, [lane.lines() for lane in rec.lanes]
        assert running(daemon)  # it outlived its run, and wrote nowhere anyone sees
    finally:
        os.kill(daemon, signal.SIGKILL)


def test_the_layers_are_counted_and_removed_by_clean_pool(r: Repository, layers: str) -> None:
    assert verify_commit(r, "HEAD", cfg(CHECK), key="k").verdict == Verdict.PASS
    use = repository_use(r)
    assert ("verification layers" in use) == (layers == "on"), use
    cp = run_forge(r.root, "clean", "--pool")
    assert cp.returncode == 0, cp.stdout + cp.stderr
    if layers == "on":
        root = kind_dir(r, layer_mode.choose(store_dir(r)))
        assert f"pool: removed layer {root / 'base'}/" in cp.stdout
        assert not [p for p in (root / "base").iterdir() if p.is_dir()]
        assert not [p for p in (root / "setup").iterdir() if p.is_dir()]
    # made again when needed
    another_tree(r)
    assert verify_commit(r, "HEAD", cfg(CHECK), key="k").verdict == Verdict.PASS


def test_where_no_overlay_can_be_mounted_checkouts_are_used_and_said_once(
    tmp_path: Path, layers: str
) -> None:
    if layers == "off":
        pytest.skip("checkouts were asked for: nothing to fall back from")
    odd = tmp_path / "a:b"  # a path an overlay's options cannot name
    odd.mkdir()
    git(odd, "init", "-q", "-b", "main")
    (odd / "README.md").write_text("x\n")
    commit_all(odd, "initial")
    r = discover(odd)
    said: list[str] = []
    ask = Ask(on_event=said.append, force=True)
    for _ in range(2):
        assert (
            verify_commit(r, "HEAD", cfg("true", setup=None), key="k", ask=ask).verdict
            == Verdict.PASS
        )
    fallback = [line for line in said if line.startswith("verification checkouts: checkouts (")]
    assert fallback == [
        f"verification checkouts: checkouts (the layer store's path {store_dir(r)} holds a `,`, `:` or `\\`)"
    ]
    assert not store_dir(r).exists() or not list(store_dir(r).rglob("tree"))


def test_a_later_tree_and_a_folder_made_again_are_read_through_the_layers(r: Repository) -> None:
    assert verify_commit(r, "HEAD", cfg("true", setup=None), key="k").verdict == Verdict.PASS
    (r.root / "src" / "app.py").unlink()  # the next tree: a delta over the first's layer
    (r.root / "src" / "keep.py").write_text("KEEP = 1\n")
    (r.root / "src" / "other.py").write_text("OTHER = 1\n")
    commit_all(r.root, "app.py gone, two new")
    seen = "test ! -e src/app.py && grep -q KEEP src/keep.py && git diff --quiet HEAD"
    rec = verify_commit(r, "HEAD", cfg(seen, setup=None), key="k")
    assert rec.verdict == Verdict.PASS, [lane.lines() for lane in rec.lanes]
    # the folder removed and made again (opaque) with one of its files as it was
    again = "rm -rf src && mkdir src && echo 'OTHER = 1' > src/other.py"
    rec = verify_commit(r, "HEAD", cfg(again, setup=None), key="k")
    assert rec.verdict == Verdict.FAIL
    assert rec.lanes[0].runs[0].changed == ("src/keep.py",)
