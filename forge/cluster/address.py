"""Where a cluster's scheduler is: `local:N` (workers forge starts here), or an
address, and whether that address is this machine (then its workers, started here
too, reach this repository's objects through a bare repository on this disk, as
`local:N` workers do, and no `[cluster] remote` is needed)."""

from __future__ import annotations

import contextlib
import socket
from urllib.parse import urlsplit

from forge.errors import ForgeError

REMOTE_EXAMPLE = '[cluster] remote = "ssh://you@this-host/srv/git/repo.git"'


def parse_address(address: str) -> int | None:
    """N for `local:N`, None for a scheduler address; a bad value is a ForgeError."""
    if address.startswith("local:"):
        n = address.removeprefix("local:")
        if not n.isdigit() or int(n) < 1:
            raise ForgeError(f"--cluster {address}: expected local:N with N >= 1 workers")
        return int(n)
    if "://" not in address:
        raise ForgeError(
            f"--cluster {address}: expected a scheduler address (tcp://host:8786) or local:N"
        )
    return None


def host_of(address: str) -> str:
    try:
        return urlsplit(address).hostname or ""
    except ValueError:
        return ""


def is_this_machine(address: str) -> bool:
    """Whether the scheduler's host names this machine: a loopback name or address,
    this machine's host name, or an address one of its interfaces holds (binding a
    socket to it succeeds). Nothing is sent anywhere."""
    host = host_of(address)
    if not host:
        return False
    if host in ("localhost", "0.0.0.0", "::") or host.startswith("127.") or host == "::1":
        return True
    if host in (socket.gethostname(), socket.getfqdn()):
        return True
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except (OSError, UnicodeError):
        return False
    for family, _type, _proto, _name, sockaddr in infos:
        with contextlib.suppress(OSError), socket.socket(family, socket.SOCK_STREAM) as s:
            s.bind((sockaddr[0], 0, *sockaddr[2:]))
            return True
    return False


def remote_needed(address: str) -> ForgeError:
    """The error for a scheduler on another machine with no `[cluster] remote`."""
    return ForgeError(
        f"--cluster {address}: the scheduler is on another machine, so its workers need a "
        f"git remote they can reach; add one to forge.toml, e.g. {REMOTE_EXAMPLE}"
    )
