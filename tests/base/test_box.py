"""The box: a command run without the sandbox gets pid and mount namespaces of its
own (forge's key and private folder covered, what it leaves named and ended with
it), real where a namespace can be made here; cgroup v2 containment of commands,
real where the hierarchy is delegated to us, otherwise detection (saying why)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

import pytest
from helpers.runkit import wait_for

from forge.base import box, procgroup, seal

no_box = pytest.mark.skipif(box.unavailable() is not None, reason=f"no box: {box.unavailable()}")


def _run(tmp_path: Path, command: str, **more: object) -> tuple[procgroup.GroupResult, str]:
    """`command` run as a task's is, its private folder `tmp_path/private`."""
    log = tmp_path / "log"
    spec = procgroup.GroupSpec(command, cwd=tmp_path, log_path=log, hide=(tmp_path / "private",))
    res = procgroup.run_group(spec.__class__(**{**spec.__dict__, **more}))
    return res, log.read_text()


def _marked(mark: str) -> list[int]:
    """Live `sh` processes of the machine whose command line holds `mark` (not the
    bash that runs the command which starts them)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            line = Path(f"/proc/{pid}/cmdline").read_bytes()
            if line.startswith(b"sh\0") and mark.encode() in line:
                found.append(int(pid))
        except OSError:
            continue
    return found


@no_box
def test_a_boxed_command_reads_neither_forges_key_nor_its_private_folder(tmp_path: Path) -> None:
    secret = seal.key()
    assert secret is not None
    key = seal.key_dir() / "key"
    history = tmp_path / "private" / "history.sqlite"
    history.parent.mkdir()
    history.write_text("the attempts and a person's words")
    session = seal.key_dir() / "repo-0123" / "p" / "agent-state" / "session.json"
    session.parent.mkdir(parents=True)
    session.write_text("the agent's own session")
    _, log = _run(tmp_path, f"cat {key}; cat {history}; ls -A {history.parent}; cat {session}")
    assert "the agent's own session" in log, "the agents' per-task state is there"
    assert secret.decode() not in log and "person's words" not in log, log
    assert f"{history}: No such file" in log, log
    assert key.read_bytes().strip() == secret, "the host's key is untouched"
    assert history.read_text() == "the attempts and a person's words"


@no_box
def test_a_folder_made_after_the_box_is_hidden_too(tmp_path: Path) -> None:
    """A private folder not there yet is made before the command starts, so what
    forge writes into it while the command runs stays out of its sight."""
    private = tmp_path / "private"
    go = tmp_path / "go"
    command = f"while [ ! -e {go} ]; do sleep 0.01; done; cat {private}/later"
    out: list[tuple[procgroup.GroupResult, str]] = []
    runner = threading.Thread(target=lambda: out.append(_run(tmp_path, command)))
    runner.start()
    wait_for(private.is_dir, what="the private folder made")
    (private / "later").write_text("written while the command ran")
    go.touch()
    runner.join()
    res, log = out[0]
    assert res.returncode != 0 and "written while" not in log, log


@no_box
def test_a_daemon_that_leaves_group_tag_and_folder_ends_with_its_box(tmp_path: Path) -> None:
    """Double-forked, setsid, its environment dropped and its folder left: found by
    nothing forge looks at outside, it still ends with the command's namespace,
    and the command's result names it."""
    mark = f"forge-box-daemon-{os.getpid()}"
    go = tmp_path / "go"
    daemon = f"(cd / && setsid -f env -i sh -c 'sleep 300; : {mark}' > /dev/null 2>&1)"
    command = f"{daemon}; while [ ! -e {go} ]; do sleep 0.01; done; exit 3"
    out: list[tuple[procgroup.GroupResult, str]] = []
    runner = threading.Thread(target=lambda: out.append(_run(tmp_path, command, tag="box-t")))
    runner.start()
    wait_for(lambda: bool(_marked(mark)), what="the daemon running")
    pids = _marked(mark)
    go.touch()
    runner.join()
    res, log = out[0]
    assert res.returncode == 3, log
    assert not [pid for pid in pids if Path(f"/proc/{pid}").exists()], "the daemon outlived its run"
    assert any(name.startswith("sh (pid ") for name in res.left), res.left
    assert "left processes behind: " in log, log


@no_box
def test_a_boxed_command_keeps_its_input_and_the_descriptors_forge_passes(tmp_path: Path) -> None:
    """A task's prompt comes on stdin, a lane's test report goes to a descriptor it
    inherits: both reach the command through the box; the box's own report does not."""
    prompt = tmp_path / "prompt"
    prompt.write_text("the prompt\n")
    read_end, write_end = os.pipe()
    try:
        res, log = _run(
            tmp_path,
            f"cat; echo reported >&{write_end}; ls /proc/self/fd",
            input_path=prompt,
            pass_fds=(write_end,),
        )
    finally:
        os.close(write_end)
    with os.fdopen(read_end) as got:
        assert got.read() == "reported\n"
    assert res.returncode == 0, log
    assert log.splitlines()[0] == "the prompt"
    assert sorted(int(fd) for fd in log.splitlines()[1:]) == [0, 1, 2, 3, write_end], log


def test_without_a_namespace_the_command_runs_as_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """FORGE_BOX=off acts as where no namespace can be made: said, and the command
    runs without one (forge's key readable: the limit `forge doctor` names)."""
    monkeypatch.setenv(box.BOX_VAR, "off")
    assert box.unavailable() == f"{box.BOX_VAR}=off says so"
    secret = seal.key()
    assert secret is not None
    res, log = _run(tmp_path, f"cat {seal.key_dir() / 'key'}")
    assert res.returncode == 0 and secret.decode() in log, log


def test_detection_names_why_cgroups_are_not_used(tmp_path: Path) -> None:
    assert box._probe(tmp_path) == (None, "no cgroup v2 hierarchy at /sys/fs/cgroup")
    if box.delegated() is None:
        why = box.why_not()
        assert why
        print(f"cgroups not used here: {why}")


def test_a_wrapped_command_moves_itself_into_the_group_before_it_runs(tmp_path: Path) -> None:
    group = box.Group(tmp_path)
    (tmp_path / "cgroup.procs").write_text("")
    cp = subprocess.run(group.wrap(["sh", "-c", "echo $$"]), capture_output=True, text=True)
    assert cp.returncode == 0
    assert group.pids() == [int(cp.stdout)], "the exec'd command is the pid moved in"


@pytest.mark.skipif(box.delegated() is None, reason=f"cgroups: {box.why_not()}")
def test_a_daemon_that_leaves_everything_behind_is_killed(tmp_path: Path) -> None:
    mark = "31999"
    res = procgroup.run_group(
        procgroup.GroupSpec(
            f"cd / && setsid -f env -i sleep {mark} > /dev/null 2>&1",
            cwd=tmp_path,
            log_path=tmp_path / "log",
            tag="cgroup-test",
        ),
        stop=threading.Event(),
    )
    assert res.returncode == 0
    left = [
        pid
        for pid in filter(str.isdigit, os.listdir("/proc"))
        if Path(f"/proc/{pid}/cmdline").exists()
        and Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[:2] == [b"sleep", mark.encode()]
    ]
    assert not left


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="becomes a user")
def test_as_a_user_the_records_are_covered_and_cannot_be_uncovered(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A user's box is made in a user namespace, and the command runs in one more, as
    the user again: it holds no capability there, so `umount` is refused and what
    covers forge's records stays. forge itself cannot run as another user here (its
    interpreter is root's), so the box forge would make for one is run as one."""
    with tempfile.TemporaryDirectory() as where:
        top = Path(where)
        top.chmod(0o755)
        monkeypatch.setenv("XDG_STATE_HOME", str(top / "state"))
        key = seal.key_dir() / "key"
        key.parent.mkdir(parents=True)
        key.write_text("the-secret-key\n")
        private = top / "private"
        private.mkdir()
        (private / "history.sqlite").write_text("the-history\n")
        subprocess.run(["chown", "-R", "65534:65534", where], check=True)
        for name in ("geteuid", "getuid", "getgid"):
            monkeypatch.setattr(os, name, lambda: 65534)
        look = f"id -u; cat {key} {private}/history.sqlite; umount {private}; ls -A {private}"
        with box.report_file() as fd:
            argv = box.wrap(["sh", "-c", look], hide=(private,), report=fd, grace=0)
            become = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"]
            cp = subprocess.run(
                [*become, *argv], capture_output=True, text=True, pass_fds=(fd,), cwd="/"
            )
    out = cp.stdout + cp.stderr
    if "unshare: " in out and "Operation not permitted" in out:
        pytest.skip(f"no user namespace for a user here: {out}")
    assert cp.stdout.splitlines()[0] == "65534", out
    assert "the-secret-key" not in out and "the-history" not in out, out
    assert "umount: " in out, out
