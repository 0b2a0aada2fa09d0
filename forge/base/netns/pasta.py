"""A network of its own for a sandboxed command that keeps the network (an agent, a
setup, a check or a lane with `network = true`): a network namespace reaching the
internet through pasta's user-mode networking (passt.top), and nothing of the
host's but the loopback ports the plan names (`host_ports`, each forwarded with
`-T`, so a command still uses `127.0.0.1:PORT`). The host's abstract unix sockets
belong to its network namespace: they are out of reach. pasta maps no host address
into the namespace (`--no-map-gw`) and forwards no port either way but those named
(its default, `auto`, would forward every port bound on the host).

As root, pasta's own user namespace cannot map uid 0 (and `nobody` cannot enter a
namespace root made), so forge makes a named namespace (`ip netns add`), starts
pasta on it as root (`--runas 0:0`; it confines itself, and forge stops it when the
command ends) and runs the command through `nsenter --net`; as another user, pasta
makes the namespaces and runs the command itself (`pasta ... -- bwrap ...`). In
both, the network exists before the command starts. A resolver on the host's
loopback (systemd-resolved's 127.0.0.53) is reached through pasta's `--dns-forward`
and a resolv.conf of the namespace's own (`resolv_conf`). Without pasta (or, as root,
`ip` and `nsenter`) the command keeps the host's network, and `forge doctor` says so.
"""

from __future__ import annotations

import contextlib
import functools
import ipaddress
import os
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from forge.errors import ForgeError

HOW_TO_GET = "install passt (`apt-get install passt`, `dnf install passt`), which holds pasta"
# What pasta's processes are called: bwrap's and pasta's ends are forge's, not a
# command's leftovers.
COMMS = ("pasta", "passt", "passt.avx2", "pasta.avx2")
_NETNS = Path("/run/netns")
RESOLV = Path("/etc/resolv.conf")
# Where a namespace of its own sends name lookups when the host's resolver is on the
# host's loopback: pasta forwards what goes there to that resolver.
DNS_FORWARD = "169.254.1.53"
_PATIENCE = 10.0  # seconds pasta may take to set a namespace up, and to go


def _tools() -> dict[str, str | None]:
    return {name: shutil.which(name) for name in ("pasta", "ip", "nsenter")}


def unavailable() -> str | None:
    """Why a command that keeps the network cannot get one of its own here (None:
    it can): a tool missing, or a network that could not be made (once a process)."""
    found = _tools()
    if found["pasta"] is None:
        return f"no pasta here: {HOW_TO_GET}"
    if os.geteuid() == 0:
        missing = [name for name in ("ip", "nsenter") if found[name] is None]
        if missing:
            return f"as root, an own network needs {' and '.join(missing)} (iproute2, util-linux)"
    return _tried()


@functools.cache
def _tried() -> str | None:
    """Make a network of its own once and run `true` in it (None: it works here;
    else why not: no /dev/net/tun in a container, namespaces refused)."""
    try:
        with contextlib.ExitStack() as stack:
            _run([*own_network((), stack), "true"], "run a command in it")
    except ForgeError as exc:
        return str(exc)
    return None


def _ports(host_ports: Sequence[int]) -> str:
    return ",".join(str(p) for p in host_ports) or "none"


def _options(host_ports: Sequence[int]) -> list[str]:
    """pasta's options: the namespace configured, no host address in it, no port
    forwarded either way but the named host ports (TCP, to the host's loopback), and
    name lookups forwarded to a resolver on the host's loopback."""
    dns = ["--dns-forward", DNS_FORWARD] if loopback_resolver() else []
    return [
        "--config-net",
        "--no-map-gw",
        "--quiet",
        *("--tcp-ports", "none", "--udp-ports", "none", "--udp-ns", "none"),
        *("--tcp-ns", _ports(host_ports)),
        *dns,
    ]


def loopback_resolver(conf: Path = RESOLV) -> str | None:
    """The host's first resolver when it is on the host's loopback (systemd-resolved's
    127.0.0.53, Docker's 127.0.0.11), which a namespace of its own cannot reach."""
    try:
        lines = conf.read_text().splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    for line in lines:
        words = line.split()
        if words[:1] == ["nameserver"] and len(words) > 1:
            with contextlib.suppress(ValueError):
                if ipaddress.ip_address(words[1].split("%")[0]).is_loopback:
                    return words[1]
            return None
    return None


def resolv_conf(into: Path, conf: Path = RESOLV) -> Path | None:
    """When the host's resolver is on its loopback, the resolv.conf a namespace of
    its own reads (written into the folder `into`): its lookups go to DNS_FORWARD,
    which pasta forwards to that resolver; the host's `search` and `options` kept.
    None: the host's own serves."""
    if loopback_resolver(conf) is None:
        return None
    kept = [
        ln for ln in conf.read_text().splitlines() if ln.split()[:1] in (["search"], ["options"])
    ]
    into.mkdir(parents=True, exist_ok=True)
    path = into / "resolv.conf"
    path.write_text("".join(f"{line}\n" for line in [f"nameserver {DNS_FORWARD}", *kept]))
    return path


def own_network(host_ports: Sequence[int], stack: contextlib.ExitStack) -> list[str]:
    """The words to put before bwrap's so that it runs in a network namespace of its
    own, set up now and torn down when `stack` closes. ForgeError when it cannot be
    made (`unavailable` said it could)."""
    found = _tools()
    pasta = found["pasta"]
    assert pasta is not None
    if os.geteuid() != 0:
        return [pasta, *_options(host_ports), "--foreground", "--"]
    ip, nsenter = found["ip"], found["nsenter"]
    assert ip is not None and nsenter is not None
    _sweep(ip)
    name = f"forge-{os.getpid()}-{secrets.token_hex(4)}"
    _run([ip, "netns", "add", name], "make a network namespace")
    stack.callback(_run, [ip, "netns", "delete", name], None)
    folder = Path(tempfile.mkdtemp(prefix="forge-pasta-"))
    stack.callback(shutil.rmtree, folder, ignore_errors=True)
    pid_file = folder / "pid"
    options = _options(host_ports)
    _run(
        [pasta, "--runas", "0:0", *options, "--pid", str(pid_file), "--netns", name], "start pasta"
    )
    stack.callback(_stop, pid_file)
    return [nsenter, f"--net={_NETNS / name}", "--"]


def _sweep(ip: str) -> None:
    """Delete the namespaces a forge process that is gone left (its pasta quits
    with the namespace)."""
    with contextlib.suppress(OSError):
        for entry in os.listdir(_NETNS):
            parts = entry.split("-")
            ours = len(parts) == 3 and parts[0] == "forge" and parts[1].isdigit()
            if ours and not Path(f"/proc/{parts[1]}").exists():
                _run([ip, "netns", "delete", entry], None)


def _run(argv: list[str], doing: str | None) -> None:
    """Run a short setup command; a failure is a ForgeError saying what it was
    `doing` (None: a teardown, whose failure is ignored)."""
    try:
        cp = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            cwd="/",
            timeout=_PATIENCE,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        if doing is None:
            return
        raise ForgeError(f"the sandbox's network: cannot {doing}: {exc}") from exc
    if cp.returncode != 0 and doing is not None:
        said = [ln for ln in cp.stderr.splitlines() if "syslog" not in ln]
        raise ForgeError(f"the sandbox's network: cannot {doing}: {(said or ['?'])[-1]}")


def _stop(pid_file: Path) -> None:
    """Stop the pasta that wrote `pid_file` (it went into the background: forge, a
    subreaper, may be its parent now, and reaps it then)."""
    with contextlib.suppress(OSError, ValueError):
        pid = int(pid_file.read_text().split()[0])
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + _PATIENCE
        while time.monotonic() < deadline:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)
            if _gone(pid):
                return
            time.sleep(0.01)
        os.kill(pid, signal.SIGKILL)


def _gone(pid: int) -> bool:
    """Whether `pid` has ended (a zombie another process has yet to reap too)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rpartition(")")[2].split()[:1] == ["Z"]
