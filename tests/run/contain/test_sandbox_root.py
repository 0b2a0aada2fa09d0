"""The sandbox as root (as in CI and containers): a task holds no capability, cannot
remount the file system, read forge's key or write outside its worktree; sockets
the environment names are hidden unless the plan passes them; checks and lanes run
without the network unless they say `network = true`; forge's per-plan agent state
is writable, the agents' folders are not a lane's."""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.gitkit import git, run_forge
from helpers.runkit import plan_and_run, statuses, write_plan

from forge.base import sandbox, seal

pytestmark = pytest.mark.skipif(
    sandbox.unavailable() is not None, reason=f"no sandbox here: {sandbox.unavailable()}"
)


@pytest.fixture
def outside() -> Iterator[Path]:
    """A folder outside /tmp (which the sandbox replaces by its own), removed after."""
    where = Path(tempfile.mkdtemp(prefix="forge-test-", dir="/var/tmp"))
    yield where
    shutil.rmtree(where, ignore_errors=True)


def _task(run: str, *, extra: str = "", head: str = "") -> str:
    return (
        f"sandbox = true\n{head}[[task]]\nid = \"a\"\nfiles = [\".\"]\nrun = '''{run}'''\n{extra}"
    )


def _merged(repo: Path, path: str) -> str:
    return git(repo, "show", f"forge/p-integration:{path}")


def test_a_task_as_root_holds_no_capability_and_stays_inside(
    repo: Path, tmp_path: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert seal.key() is not None
    keys = seal.key_dir()
    monkeypatch.setenv("TMPDIR", str(tmp_path / "gone"))  # does not exist inside
    run = (
        "grep -E '^Cap(Eff|Prm|Amb)' /proc/self/status > caps.txt; "
        "mount -o remount,rw / 2>/dev/null; "
        f"umount {keys} 2>/dev/null; cat {keys}/key > stolen.txt 2>/dev/null; "
        f"echo x > {outside}/written 2>/dev/null; "
        "cat /proc/sys/kernel/hostname > /proc/sys/kernel/hostname 2>/dev/null && touch sysctl; "
        "mktemp > made.txt; echo done > out.txt"
    )
    cp = plan_and_run(repo, write_plan(tmp_path, _task(run)))
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert _merged(repo, "out.txt") == "done"
    caps = _merged(repo, "caps.txt").splitlines()
    assert len(caps) == 3 and all(line.endswith("0000000000000000") for line in caps), caps
    assert _merged(repo, "stolen.txt") == "", "the task read forge's key"
    assert not (outside / "written").exists(), "the task wrote outside its worktree"
    assert "sysctl" not in git(repo, "ls-tree", "--name-only", "forge/p-integration")
    assert _merged(repo, "made.txt").startswith("/tmp/")
    assert "were not touched" in cp.stdout


def test_a_socket_the_environment_names_is_hidden_unless_passed(
    repo: Path, tmp_path: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = outside / "agent.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.listen()
    monkeypatch.setenv("SSH_AUTH_SOCK", str(path))
    reach = (
        f'python3 -c "import socket; socket.socket(socket.AF_UNIX).connect(\\"{path}\\")" '
        '&& echo reached > out.txt || echo hidden > out.txt; echo "[$SSH_AUTH_SOCK]" > var.txt'
    )
    try:
        assert plan_and_run(repo, write_plan(tmp_path, _task(reach))).returncode == 0
        assert _merged(repo, "out.txt") == "hidden"
        assert _merged(repo, "var.txt") == "[]"
        passed = write_plan(tmp_path, _task(reach, head='sockets = ["SSH_AUTH_SOCK"]\n'), name="q")
        assert run_forge(repo, "plan", str(passed)).returncode == 0
        cp = run_forge(repo, "run", "q")
        assert cp.returncode == 0, cp.stdout + cp.stderr
        assert git(repo, "show", "forge/q-integration:out.txt") == "reached"
    finally:
        server.close()


@pytest.fixture
def listener() -> Iterator[int]:
    """A TCP listener on 127.0.0.1 (connections wait in its backlog)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    yield server.getsockname()[1]
    server.close()


def _connect(port: int) -> str:
    return f"python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), 5)\""


@pytest.mark.parametrize("network", [False, True])
def test_a_check_has_the_network_only_when_it_says_so(
    repo: Path, tmp_path: Path, listener: int, network: bool
) -> None:
    extra = f"check = '''{_connect(listener)}'''\n" + ("network = true\n" if network else "")
    # The task's own command (an agent's place) keeps the network either way; the
    # host's loopback port is reached where the plan names it.
    head = f"host_ports = [{listener}]\n"
    plan = _task(_connect(listener) + " && touch ok", extra=extra, head=head)
    cp = plan_and_run(repo, write_plan(tmp_path, plan))
    assert statuses(repo) == {"a": "MERGED" if network else "FAILED"}, cp.stdout + cp.stderr


@pytest.mark.parametrize("network", [False, True])
def test_a_lane_has_the_network_only_when_it_says_so(
    repo: Path, tmp_path: Path, listener: int, network: bool
) -> None:
    lane = f"[verify.lanes.net]\ncommand = '''{_connect(listener)}'''\n"
    lane += "network = true\n" if network else ""
    head = f"sandbox = true\nhost_ports = [{listener}]\n"
    plan = write_plan(tmp_path, head + _task_table("echo a > a.txt") + lane)
    cp = plan_and_run(repo, plan)
    # Without the network the lane fails on the head too: nothing lands, nobody is blamed.
    assert statuses(repo) == {"a": "MERGED" if network else "QUEUED"}, cp.stdout + cp.stderr


def _task_table(run: str) -> str:
    return f"[[task]]\nid = \"a\"\nfiles = [\".\"]\nrun = '''{run}'''\n"


def test_the_agent_state_folder_is_writable_and_a_lane_writes_no_agent_folder(
    repo: Path, tmp_path: Path
) -> None:
    assert seal.key() is not None  # its folder holds the agent state: hidden, but not that
    claude = Path(os.environ["HOME"]) / ".claude"
    claude.mkdir()
    state = Path(os.environ["XDG_STATE_HOME"]) / "forge"
    run = f"touch $(echo {state}/*/p/agent-state)/mine && echo ok > out.txt"
    lane = "verify = '''touch ~/.claude/planted; true'''\n"
    cp = plan_and_run(repo, write_plan(tmp_path, lane + _task(run)))
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert list(state.glob("*/p/agent-state/mine")), "the agent state folder was not writable"
    assert not (claude / "planted").exists(), "a lane wrote the agents' folder"


def test_a_sandbox_that_keeps_a_capability_is_refused_in_one_line(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bwrap that does not drop capabilities (as root, without a user namespace)."""
    real = shutil.which("bwrap")
    assert real is not None
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "bwrap"
    fake.write_text(
        '#!/bin/bash\nargs=()\nfor a in "$@"; do case $a in --cap-drop|ALL|--unshare-user) ;; '
        f'*) args+=("$a");; esac; done\nexec {real} "${{args[@]}}"\n'
    )
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    assert (
        run_forge(repo, "plan", str(write_plan(tmp_path, _task("echo a > a.txt")))).returncode == 0
    )
    cp = run_forge(repo, "run")
    assert cp.returncode == 2, cp.stdout + cp.stderr
    assert cp.stderr.count("\n") == 1 and "keeps capabilities" in cp.stderr, cp.stderr
    assert not (repo / ".git" / "forge" / "plans" / "p" / "state.json").exists()
