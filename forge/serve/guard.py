"""Who may ask `forge serve` for what.

Bound to a loopback address, a page or a log is served to anyone who can reach it
(this machine's users); bound to any other address, every request needs the token
(generated at start, printed in the address, as Jupyter's). Every POST needs the
token on any address: any web page a person visits can POST to 127.0.0.1, and only
a page this server sent knows the token. A request whose `Host` is not the bound
address (or localhost) is refused, so a name rebound to 127.0.0.1 by someone's DNS
reads nothing (DNS rebinding). Logs can hold secrets: the same rules guard them.
"""

from __future__ import annotations

import functools
import hmac
import ipaddress
import socket
from http.cookies import CookieError, SimpleCookie
from urllib.parse import parse_qs

from forge.frozen import frozen

COOKIE = "forge_token"
HEADER = "X-Forge-Token"
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]")


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@functools.cache
def _names(host: str) -> frozenset[str]:
    names = {host, *LOOPBACK_NAMES}
    if host in ("0.0.0.0", "::", ""):
        names |= {socket.gethostname(), socket.getfqdn()}
    if ":" in host and not host.startswith("["):
        names.add(f"[{host}]")
    return frozenset(names)


@frozen
class Guard:
    host: str  # the address bound
    port: int
    token: str

    @property
    def token_always(self) -> bool:
        """Every request needs the token (bound to an address others can reach)."""
        return not is_loopback(self.host)

    def hosts(self) -> frozenset[str]:
        """The `Host` headers accepted: the bound address, localhost (and, bound to
        every address, this machine's names)."""
        return frozenset(f"{n}:{self.port}".lower() for n in _names(self.host))

    def host_ok(self, header: str | None) -> bool:
        return header is not None and header.lower() in self.hosts()

    def token_ok(self, given: str | None) -> bool:
        return given is not None and hmac.compare_digest(given.encode(), self.token.encode())


def token_in(query: str, header: str | None, cookie: str | None, *, post: bool) -> str | None:
    """The token a request carries: its header, its query's `token`, or (not for a
    POST: a cookie goes with a form another site makes) the cookie this server set."""
    if header:
        return header
    given = parse_qs(query).get("token")
    if given:
        return given[0]
    if post or not cookie:
        return None
    jar: SimpleCookie = SimpleCookie()
    try:
        jar.load(cookie)
    except CookieError:  # a malformed cookie is no token
        return None
    morsel = jar.get(COOKIE)
    return morsel.value if morsel else None
