"""A sandboxed agent has a network of its own (forge/base/netns/pasta.py): the
host's abstract unix sockets and its loopback ports are out of its reach, but for
the ports the plan names in `host_ports`. The host services are the test's own: an
abstract socket and two TCP servers on 127.0.0.1."""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.gitkit import git
from helpers.runkit import plan_and_run, write_plan

from forge.base import sandbox
from forge.base.netns import pasta

needs_own_network = pytest.mark.skipif(
    sandbox.unavailable() is not None or pasta.unavailable() is not None,
    reason=f"no sandbox or no pasta here: {sandbox.unavailable() or pasta.unavailable()}",
)


def _serve(server: socket.socket, stop: threading.Event) -> None:
    """Answer each connection with "hi" until `stop`."""
    server.settimeout(0.1)
    while not stop.is_set():
        try:
            conn, _ = server.accept()
        except TimeoutError:
            continue
        with conn:
            conn.sendall(b"hi")


@contextlib.contextmanager
def _services() -> Iterator[tuple[str, int, int]]:
    """An abstract unix socket and two TCP ports on the host's loopback, served
    while the block runs: (the socket's name, a port, another port)."""
    name = f"forge-test-{secrets.token_hex(6)}"
    servers = [socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)]
    servers[0].bind(f"\0{name}")
    for _ in range(2):
        tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        tcp.bind(("127.0.0.1", 0))
        servers.append(tcp)
    stop = threading.Event()
    threads = []
    for server in servers:
        server.listen()
        threads.append(threading.Thread(target=_serve, args=(server, stop), daemon=True))
        threads[-1].start()
    try:
        yield name, servers[1].getsockname()[1], servers[2].getsockname()[1]
    finally:
        stop.set()
        for t in threads:
            t.join()
        for server in servers:
            server.close()


# The interpreter itself, not a virtualenv's link to it: a virtualenv under /tmp
# (a clone checked there) is covered by the sandbox's private /tmp.
PY = os.path.realpath(sys.executable)

_PROBE = """
import socket, sys
def reach(family, where):
    s = socket.socket(family, socket.SOCK_STREAM)
    s.settimeout(5)
    try:
        s.connect(where)
        return s.recv(2).decode() or "closed"
    except OSError as exc:
        return type(exc).__name__
    finally:
        s.close()
name, named, unnamed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
print("abstract", reach(socket.AF_UNIX, "\\0" + name))
print("named", reach(socket.AF_INET, ("127.0.0.1", named)))
print("unnamed", reach(socket.AF_INET, ("127.0.0.1", unnamed)))
"""


def _reach(repo: Path, tmp_path: Path, *, boxed: bool) -> dict[str, str]:
    """What a task's command reaches of the test's services, run through `forge run`."""
    # Outside /tmp, which the sandbox replaces by its own.
    folder = Path(tempfile.mkdtemp(prefix="forge-test-probe-", dir="/var/tmp"))
    probe = folder / "probe.py"
    probe.write_text(_PROBE)
    with contextlib.ExitStack() as stack:
        stack.callback(shutil.rmtree, folder, ignore_errors=True)
        name, named, unnamed = stack.enter_context(_services())
        plan = (
            f"sandbox = {'true' if boxed else 'false'}\nhost_ports = [{named}]\n"
            '[[task]]\nid = "a"\nfiles = ["."]\n'
            f"run = '''{PY} - {name} {named} {unnamed} < {probe} > reach.txt'''\n"
        )
        cp = plan_and_run(repo, write_plan(tmp_path, plan))
    assert cp.returncode == 0, cp.stdout + cp.stderr
    seen = git(repo, "show", "forge/p-integration:reach.txt")
    return dict(line.split(" ", 1) for line in seen.splitlines())


@needs_own_network
def test_a_sandboxed_agent_reaches_only_the_host_ports_named(repo: Path, tmp_path: Path) -> None:
    seen = _reach(repo, tmp_path, boxed=True)
    assert seen["abstract"] == "ConnectionRefusedError", seen  # not the host's
    assert seen["named"] == "hi", seen
    assert seen["unnamed"] == "ConnectionRefusedError", seen


def test_without_the_sandbox_the_host_is_reached(repo: Path, tmp_path: Path) -> None:
    # The test's services are really there: what the sandbox refuses is its doing.
    assert _reach(repo, tmp_path, boxed=False) == {
        "abstract": "hi",
        "named": "hi",
        "unnamed": "hi",
    }


def test_without_pasta_a_command_keeps_the_hosts_network(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = shutil.which
    monkeypatch.setattr(shutil, "which", lambda name: None if name == "pasta" else real(name))
    box = sandbox.Sandbox((tmp_path,), host_ports=(11434,))
    with contextlib.ExitStack() as stack:
        wrapped = box.wrap(["true"], tmp=tmp_path, env={}, stack=stack)
    assert wrapped.argv[0] == "bwrap" and "--unshare-net" not in wrapped.argv


def test_a_command_without_the_network_gets_no_pasta(tmp_path: Path) -> None:
    box = sandbox.Sandbox((tmp_path,), network=False, host_ports=(11434,))
    with contextlib.ExitStack() as stack:
        wrapped = box.wrap(["true"], tmp=tmp_path, env={}, stack=stack)
    assert wrapped.argv[0] == "bwrap" and "--unshare-net" in wrapped.argv


# Run in a mount namespace of its own whose /etc/resolv.conf names a resolver on
# the host's loopback (this one: it answers every A question with 192.0.2.99).
_LOOKUP = """
import contextlib, socket, struct, subprocess, sys, threading
from pathlib import Path
from forge.base.sandbox import Sandbox

server = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
try:
    server.bind(("127.0.0.1", 53))
except OSError:
    sys.exit(3)

def answer():
    while True:
        data, peer = server.recvfrom(512)
        end = 12
        while data[end]:
            end += data[end] + 1
        question = data[12 : end + 5]
        a = data[end + 1 : end + 3] == b"\\0\\1"
        head = data[:2] + b"\\x81\\x80" + struct.pack(">HHHH", 1, int(a), 0, 0)
        record = b"\\xc0\\x0c" + struct.pack(">HHIH", 1, 1, 60, 4) + bytes([192, 0, 2, 99])
        server.sendto(head + question + (record if a else b""), peer)

threading.Thread(target=answer, daemon=True).start()
tmp = Path(sys.argv[1])
with contextlib.ExitStack() as stack:
    argv = ["getent", "ahostsv4", "forge-test.invalid"]
    wrapped = Sandbox((tmp,)).wrap(argv, tmp=tmp, env={"PATH": "/usr/bin:/bin"}, stack=stack)
    cp = subprocess.run(wrapped.argv, env=wrapped.env, capture_output=True, text=True)
print(cp.stdout + cp.stderr)
"""


@needs_own_network
@pytest.mark.skipif(os.geteuid() != 0, reason="a mount namespace of the test's own: root")
def test_lookups_reach_a_resolver_on_the_hosts_loopback(tmp_path: Path) -> None:
    (tmp_path / "resolv.conf").write_text("nameserver 127.0.0.1\n")
    (tmp_path / "lookup.py").write_text(_LOOKUP)
    (tmp_path / "box").mkdir()
    inside = (
        f"mount --bind {tmp_path}/resolv.conf /etc/resolv.conf && "
        f"exec {sys.executable} {tmp_path}/lookup.py {tmp_path}/box"
    )
    cp = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c", inside],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if cp.returncode == 3:
        pytest.skip("127.0.0.1:53 is taken here")
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert cp.stdout.startswith("192.0.2.99 "), cp.stdout + cp.stderr
