"""`forge serve`: the standard library's threading HTTP server, a page per plan and
an index, server-sent events for the live pages, logs, and the page's actions.

Routes: `/` (the plans), `/plan/NAME` (a plan's page), `/events` and
`/events/plan/NAME` (their streams), `/log?path=PATH` (a log of forge's own
folders), and POST `/plan/NAME/hold`, `/plan/NAME/resume`,
`/plan/NAME/retry/TASK`. Anything else is a 404; the rules of guard.py come first.
"""

from __future__ import annotations

import json
import os
import socket
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, quote, unquote, urlsplit

from forge.commands.report.render import Section, page
from forge.errors import ForgeError
from forge.frozen import frozen
from forge.git.repo import Repository
from forge.serve import actions, logs
from forge.serve.follow import INDEX, Follower, Hub
from forge.serve.guard import COOKIE, HEADER, Guard, token_in
from forge.serve.script import live_extra
from forge.serve.views import Prices, plan_view

KEEPALIVE = 15.0  # seconds between comments on a quiet stream (a proxy keeps it open)


class _Server(ThreadingHTTPServer):
    daemon_threads = True  # a stream left open never keeps forge from exiting

    def __init__(self, address: tuple[str, int], repo: Repository, hub: Hub) -> None:
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        super().__init__(address, _Handler)
        self.repo, self.hub = repo, hub
        self.guard = Guard(address[0], self.server_address[1], os.urandom(18).hex())


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        pass  # the terminal shows the address; requests are not news

    # -- the rules -------------------------------------------------------------

    def _allowed(self, *, post: bool) -> bool:
        guard = self.server.guard
        if not guard.host_ok(self.headers.get("Host")):
            self._text(HTTPStatus.FORBIDDEN, "refused: the Host header is not this server's")
            return False
        if not (post or guard.token_always):
            return True
        query = urlsplit(self.path).query
        given = token_in(query, self.headers.get(HEADER), self.headers.get("Cookie"), post=post)
        if guard.token_ok(given):
            return True
        self._text(
            HTTPStatus.FORBIDDEN,
            "refused: this needs the token (the address `forge serve` printed carries it)",
        )
        return False

    # -- GET ---------------------------------------------------------------------

    def do_GET(self) -> None:
        if not self._allowed(post=False):
            return
        url = urlsplit(self.path)
        path = url.path
        if path == "/":
            self._page(INDEX, "/events", "plans")
        elif path.startswith("/plan/") and path.count("/") == 2:
            name = unquote(path.removeprefix("/plan/"))
            if name not in self.server.repo.state.recorded_plans():
                self._text(HTTPStatus.NOT_FOUND, f"no plan '{name}' is recorded here")
                return
            self._page(name, f"/events/plan/{quote(name)}", name)
        elif path == "/events":
            self._stream(INDEX)
        elif path.startswith("/events/plan/"):
            self._stream(unquote(path.removeprefix("/events/plan/")))
        elif path == "/log":
            self._log(parse_qs(url.query).get("path", [""])[0])
        else:
            self._text(HTTPStatus.NOT_FOUND, "not found")

    def _sections(self, key: str) -> list[Section]:
        found = self.server.hub.get(key)
        if found is not None:
            return found.sections
        return plan_view(self.server.repo, key, {}).sections  # recorded since the last look

    def _page(self, key: str, events: str, title: str) -> None:
        guard = self.server.guard
        html = page(title, self._sections(key), extra=live_extra(guard.token, events))
        extra = {}
        given = parse_qs(urlsplit(self.path).query).get("token")
        if given and guard.token_ok(given[0]):  # the links and streams it opens carry it
            extra["Set-Cookie"] = f"{COOKIE}={guard.token}; HttpOnly; SameSite=Strict; Path=/"
        self._send(HTTPStatus.OK, html.encode(), "text/html; charset=utf-8", extra)

    def _stream(self, key: str) -> None:
        hub = self.server.hub
        if key != INDEX and hub.get(key) is None:
            self._text(HTTPStatus.NOT_FOUND, "no such page")
            return
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Accel-Buffering", "no")
        self.end_headers()
        self.close_connection = True
        sent: dict[str, str] = {}  # a new connection is sent every section
        version = 0
        try:
            self.wfile.write(b"retry: 1000\n\n")
            while not hub.closed:
                pages = hub.wait(key, version, KEEPALIVE)
                if pages is None:
                    self.wfile.write(b": still here\n\n")
                    self.wfile.flush()
                    continue
                version = pages.version
                changed = {s.name: s.html for s in pages.sections if sent.get(s.name) != s.html}
                sent.update(changed)
                data = json.dumps({"version": version, "sections": changed})
                self.wfile.write(f"event: sections\ndata: {data}\n\n".encode())
                self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError, TimeoutError):
            return  # the page went away

    def _log(self, asked: str) -> None:
        path = logs.confined(self.server.repo.state.root, asked)
        if path is None:
            self._text(HTTPStatus.NOT_FOUND, "not found: only forge's own logs are served")
            return
        body = logs.tail(path)
        kind = "text/plain; charset=utf-8"
        self._send(HTTPStatus.OK, body, kind, {"Content-Disposition": "inline"})

    # -- POST --------------------------------------------------------------------

    def do_POST(self) -> None:
        if not self._allowed(post=True):
            return
        parts = [unquote(p) for p in urlsplit(self.path).path.split("/")[1:]]
        repo = self.server.repo
        if len(parts) < 3 or parts[0] != "plan" or parts[1] not in repo.state.recorded_plans():
            self._text(HTTPStatus.NOT_FOUND, "not found")
            return
        plan, what = parts[1], parts[2:]
        try:
            if what == ["hold"]:
                said = actions.hold(repo, plan)
            elif what == ["resume"]:
                said = actions.resume(repo, plan)
            elif len(what) == 2 and what[0] == "retry":
                said = actions.retry(repo, plan, what[1])
            else:
                self._text(HTTPStatus.NOT_FOUND, "not found")
                return
        except ForgeError as exc:
            self._text(HTTPStatus.CONFLICT, exc.message or str(exc))
            return
        self._text(HTTPStatus.OK, said)

    # -- answers -----------------------------------------------------------------

    def _text(self, status: HTTPStatus, line: str) -> None:
        self._send(status, (line + "\n").encode(), "text/plain; charset=utf-8", {})

    def _send(self, status: HTTPStatus, body: bytes, kind: str, extra: dict[str, str]) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Cache-Control", "no-store")
        for name, value in extra.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)


@frozen
class Served:
    """A server running in threads of this process."""

    url: str  # the address to open (with the token when one is needed)
    server: _Server
    follower: Follower
    thread: threading.Thread

    def stop(self) -> None:
        self.follower.stop()
        self.server.hub.close()
        self.server.shutdown()
        self.server.server_close()


def start(repo: Repository, *, host: str, port: int, prices: Prices) -> Served:
    """Serve `repo`'s plans from threads of this process until `stop`."""
    hub = Hub()
    try:
        server = _Server((host, port), repo, hub)
    except OSError as exc:
        raise ForgeError(
            f"cannot serve on {host}:{port} ({exc.strerror or exc}): "
            "choose another with --port N (0: any free port)"
        ) from None
    follower = Follower(repo, hub, prices)
    follower.start()
    thread = threading.Thread(target=server.serve_forever, name="forge-serve", daemon=True)
    thread.start()
    guard = server.guard
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{guard.port}/"
    if guard.token_always:
        url += f"?token={guard.token}"
    return Served(url, server, follower, thread)
