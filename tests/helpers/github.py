"""A scripted GitHub for tests: HTTPS on 127.0.0.1 with a certificate the test
makes (trusted through SSL_CERT_FILE), REST under /api/v3, GraphQL at
/api/graphql, over a local bare repository that is the remote.

The test scripts it: `checks` (name -> conclusion, None: still running) for every
head, `reviews` and `line_comments` of a pull request, `fault` (a status, a
rate limit or a slow answer, for the next calls of one path). It really merges
(`git merge-tree --write-tree`, `commit-tree`, `update-ref`)."""

from __future__ import annotations

import datetime
import ipaddress
import json
import re
import ssl
import subprocess
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

OWNER, NAME = "octo", "app"
TOKEN = "ghp_scriptedtoken0123456789"  # what the tests give forge as GH_ENTERPRISE_TOKEN


def make_certificate(folder: Path) -> tuple[Path, Path]:
    """A self-signed certificate for localhost and 127.0.0.1, and its key."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import NameOID

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = folder / "cert.pem", folder / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.TraditionalOpenSSL,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


@dataclass
class Fault:
    status: int = 500
    times: int = 1
    reset_in: float | None = None  # a rate limit: seconds until it resets
    delay: float = 0.0  # a slow answer: seconds before it comes


@dataclass
class Pull:
    number: int
    head: str
    base: str
    title: str
    body: str
    draft: bool
    state: str = "open"
    merged: bool = False
    merge_commit: str | None = None
    auto_merge: str | None = None  # the merge method asked for


@dataclass
class GitHubScript:
    bare: Path
    default_branch: str = "main"
    can_push: bool = True
    checks: dict[str, str | None] = field(default_factory=dict)
    checks_by_sha: dict[str, dict[str, str | None]] = field(default_factory=dict)  # wins
    reviews: list[dict[str, Any]] = field(default_factory=list)
    line_comments: list[dict[str, Any]] = field(default_factory=list)
    pulls: dict[int, Pull] = field(default_factory=dict)
    comments: list[str] = field(default_factory=list)
    faults: dict[str, Fault] = field(default_factory=dict)  # path regex -> fault
    seen: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    # --- the bare repository ------------------------------------------------------

    def git(self, *args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=self.bare, check=True, capture_output=True, text=True
        ).stdout.strip()

    def head_of(self, branch: str) -> str | None:
        out = subprocess.run(
            ["git", "rev-parse", "--verify", "-q", f"refs/heads/{branch}"],
            cwd=self.bare,
            capture_output=True,
            text=True,
        )
        return out.stdout.strip() or None

    def merge(self, pull: Pull, method: str) -> None:
        base = self.head_of(pull.base)
        head = self.head_of(pull.head)
        assert base and head
        tree = self.git("merge-tree", "--write-tree", base, head)
        parents = ["-p", base] if method in ("squash", "rebase") else ["-p", base, "-p", head]
        new = self.git("commit-tree", tree, *parents, "-m", f"Merge pull request #{pull.number}")
        self.git("update-ref", f"refs/heads/{pull.base}", new, base)
        pull.state, pull.merged, pull.merge_commit = "closed", True, new

    def checks_of(self, sha: str) -> dict[str, str | None]:
        return self.checks_by_sha.get(sha, self.checks)

    def checks_pass(self, sha: str) -> bool:
        return all(c == "success" for c in self.checks_of(sha).values())

    # --- replies --------------------------------------------------------------------

    def pull_json(self, pull: Pull) -> dict[str, Any]:
        if (
            pull.auto_merge
            and pull.state == "open"
            and self.checks_pass(self.head_of(pull.head) or "")
        ):
            self.merge(pull, pull.auto_merge)
        head = self.head_of(pull.head) or ""
        base = self.head_of(pull.base) or ""
        conflict = False
        if head and base and not pull.merged:
            cp = subprocess.run(
                ["git", "merge-tree", "--write-tree", base, head],
                cwd=self.bare,
                capture_output=True,
                text=True,
            )
            conflict = cp.returncode == 1
        return {
            "number": pull.number,
            "node_id": f"PR_{pull.number}",
            "html_url": f"https://github.example/{OWNER}/{NAME}/pull/{pull.number}",
            "state": pull.state,
            "merged": pull.merged,
            "merged_at": "2026-01-01T00:00:00Z" if pull.merged else None,
            "merge_commit_sha": pull.merge_commit,
            "draft": pull.draft,
            "title": pull.title,
            "body": pull.body,
            "mergeable_state": "dirty" if conflict else "clean",
            "head": {"ref": pull.head, "sha": head, "label": f"{OWNER}:{pull.head}"},
            "base": {"ref": pull.base, "sha": base},
        }

    def check_runs(self, sha: str) -> dict[str, Any]:
        runs = [
            {
                "name": name,
                "status": "completed" if conclusion else "in_progress",
                "conclusion": conclusion,
                "html_url": f"https://ci.example/{name}",
                "output": {"title": f"{name}: {conclusion or 'running'}", "summary": ""},
            }
            for name, conclusion in self.checks_of(sha).items()
        ]
        return {"total_count": len(runs), "check_runs": runs}


class _Handler(BaseHTTPRequestHandler):
    script: GitHubScript

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _reply(self, status: int, body: object, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def _body(self) -> dict[str, Any]:
        size = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(size) if size else b"{}"
        data: dict[str, Any] = json.loads(raw or b"{}")
        return data

    def _fault(self, path: str) -> bool:
        s = self.script
        for pattern, fault in list(s.faults.items()):
            if re.search(pattern, f"{self.command} {path}") and fault.times > 0:
                fault.times -= 1
                if fault.delay:
                    time.sleep(fault.delay)  # sleep-ok: a slow host, scripted
                    return False
                if fault.reset_in is not None:
                    reset = int(time.time() + fault.reset_in)
                    headers = {"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(reset)}
                    self._reply(403, {"message": "API rate limit exceeded"}, headers)
                else:
                    self._reply(fault.status, {"message": f"scripted {fault.status}"})
                return True
        return False

    def do_GET(self) -> None:
        self._route("GET")

    def do_POST(self) -> None:
        self._route("POST")

    def do_PATCH(self) -> None:
        self._route("PATCH")

    def do_PUT(self) -> None:
        self._route("PUT")

    def _route(self, method: str) -> None:
        parts = urlsplit(self.path)
        path, query = parts.path, parse_qs(parts.query)
        s = self.script
        with s.lock:
            s.seen.append((method, self.path, dict(self.headers.items())))
        if self._fault(path):
            return
        with s.lock:
            status, body = self._answer(method, path, query)
        self._reply(status, body)

    def _answer(self, method: str, path: str, query: dict[str, list[str]]) -> tuple[int, object]:
        s = self.script
        if path == "/api/graphql":
            return self._graphql(self._body())
        prefix = f"/api/v3/repos/{OWNER}/{NAME}"
        if not path.startswith(prefix):
            return 404, {"message": "Not Found"}
        rest = path[len(prefix) :]
        if rest == "" and method == "GET":
            return 200, {
                "name": NAME,
                "full_name": f"{OWNER}/{NAME}",
                "default_branch": s.default_branch,
                "permissions": {"admin": False, "push": s.can_push, "pull": True},
            }
        if rest == "/pulls" and method == "GET":
            head = query.get("head", [""])[0].partition(":")[2]
            found = [p for p in s.pulls.values() if p.head == head and p.state == "open"]
            return 200, [s.pull_json(p) for p in found]
        if rest == "/pulls" and method == "POST":
            body = self._body()
            if s.head_of(body["base"]) is None:
                return 422, {"message": "Validation Failed", "errors": [{"message": "base"}]}
            pull = Pull(
                len(s.pulls) + 1,
                body["head"],
                body["base"],
                body["title"],
                body.get("body") or "",
                bool(body.get("draft")),
            )
            s.pulls[pull.number] = pull
            return 201, s.pull_json(pull)
        m = re.fullmatch(r"/pulls/(\d+)(/\w+)?", rest)
        if m and int(m[1]) in s.pulls:
            return self._pull(method, s.pulls[int(m[1])], m[2] or "")
        m = re.fullmatch(r"/issues/(\d+)/comments", rest)
        if m and method == "POST":
            s.comments.append(self._body()["body"])
            return 201, {"id": len(s.comments), "body": s.comments[-1]}
        m = re.fullmatch(r"/commits/([^/]+)/check-runs", rest)
        if m:
            return 200, s.check_runs(m[1])
        return 404, {"message": "Not Found"}

    def _pull(self, method: str, pull: Pull, tail: str) -> tuple[int, object]:
        s = self.script
        if tail == "" and method == "PATCH":
            body = self._body()
            pull.title = body.get("title", pull.title)
            pull.body = body.get("body", pull.body)
            pull.base = body.get("base", pull.base)
            return 200, s.pull_json(pull)
        if tail == "" and method == "GET":
            return 200, s.pull_json(pull)
        if tail == "/reviews":
            return 200, s.reviews
        if tail == "/comments":
            return 200, s.line_comments
        if tail == "/merge" and method == "PUT":
            s.merge(pull, self._body().get("merge_method") or "merge")
            return 200, {"sha": pull.merge_commit, "merged": True, "message": "merged"}
        return 404, {"message": "Not Found"}

    def _graphql(self, body: dict[str, Any]) -> tuple[int, object]:
        s = self.script
        if "enablePullRequestAutoMerge" in body.get("query", ""):
            variables = body.get("variables") or {}
            number = int(str(variables["id"]).removeprefix("PR_"))
            pull = s.pulls[number]
            pull.auto_merge = str(variables.get("method") or "MERGE").lower()
            s.pull_json(pull)  # merges now when every check passed
            return 200, {"data": {"enablePullRequestAutoMerge": {"clientMutationId": None}}}
        return 200, {"errors": [{"message": "unknown query"}]}


class GitHubServer:
    """The server in a thread of the test's process: `script` is live."""

    def __init__(self, script: GitHubScript, cert: Path, key: Path) -> None:
        handler = type("Handler", (_Handler,), {"script": script})
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        self.httpd.socket = context.wrap_socket(self.httpd.socket, server_side=True)
        self.script = script
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def api(self) -> str:
        return f"https://127.0.0.1:{self.port}/api/v3"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def serve_remote(repo: Path, tmp_path: Path) -> GitHubServer:
    """A scripted GitHub over a bare repository that becomes `repo`'s `origin`, and
    `[host]` in `repo`'s forge.toml pointing at it (committed)."""
    certs = tmp_path / "certs"
    certs.mkdir()
    cert, key = make_certificate(certs)
    bare = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(bare)], check=True)
    server = GitHubServer(GitHubScript(bare=bare), cert, key)
    (repo / "forge.toml").write_text(
        f'[host]\napi = "{server.api}"\nrepo = "{OWNER}/{NAME}"\npoll = "0.1s"\n'
        'checks_within = "2s"\ntimeout = "5s"\nwait = "3s"\n'
    )
    for argv in (
        ["add", "forge.toml"],
        ["commit", "-q", "-m", "forge.toml"],
        ["remote", "add", "origin", str(bare)],
        ["push", "-q", "origin", "main"],
    ):
        subprocess.run(["git", *argv], cwd=repo, check=True, capture_output=True)
    return server
