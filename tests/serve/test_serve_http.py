"""`forge serve` over plain HTTP (urllib), through the real CLI: the token and Host
rules, logs of forge's own folders only (anything else a 404), the page's actions
(hold, resume, retry) with their source, a journal of a newer forge shown as
"upgrade", and bad options refused with one line."""

from __future__ import annotations

import json
import re
import signal
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import quote, urlsplit

import pytest
from helpers.gitkit import run_forge
from helpers.plans import plan, shell, task
from helpers.runkit import plan_and_run, spawn_forge, wait_for, write_plan
from helpers.servekit import serving


def fetch(
    url: str, *, method: str = "GET", headers: dict[str, str] | None = None
) -> tuple[int, str, dict[str, str]]:
    req = urllib.request.Request(url, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=20) as resp:
            return resp.status, resp.read().decode(), dict(resp.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(), dict(exc.headers)


def token_of(html: str) -> str:
    found = re.search(r'<meta name="forge-token" content="([0-9a-f]+)">', html)
    assert found, html[:500]
    return found.group(1)


@pytest.fixture
def ran(repo: Path, tmp_path: Path) -> Path:
    """A repository with plan `p` run: `a` merged, `bad` failed."""
    body = plan(shell("a"), task("bad", run="echo broke >&2; exit 3", files=["bad.txt"]))
    cp = plan_and_run(repo, write_plan(tmp_path, body), "p")
    assert cp.returncode == 5, cp.stderr
    return repo


def test_pages_streams_and_the_rules_on_loopback(ran: Path) -> None:
    with serving(ran) as url:
        assert urlsplit(url).hostname == "127.0.0.1" and "token" not in url
        status, index, _ = fetch(url)
        assert status == 200 and '/plan/p"' in index
        status, page, _ = fetch(url + "plan/p")
        assert status == 200 and 'id="task-bad"' in page and 'id="s-dag"' in page
        assert "cdn" not in page.lower() and "<script src" not in page  # nothing fetched
        # DNS rebinding: a name that is not this server's is refused, GET or POST.
        status, said, _ = fetch(url, headers={"Host": f"evil.example:{urlsplit(url).port}"})
        assert status == 403 and "Host" in said
        assert fetch(url + "plan/p", headers={"Host": "localhost"})[0] == 403  # another port
        assert fetch(url.replace("127.0.0.1", "localhost"))[0] == 200
        # Every POST needs the token, on loopback too; a cookie is not enough.
        hold = url + "plan/p/hold"
        status, said, _ = fetch(hold, method="POST")
        assert status == 403 and "token" in said
        status, _, _ = fetch(
            hold, method="POST", headers={"Cookie": f"forge_token={token_of(page)}"}
        )
        assert status == 403
        assert not (ran / ".git" / "forge" / "plans" / "p" / "hold.json").exists()
        status, _, _ = fetch(hold, method="POST", headers={"X-Forge-Token": "0" * 36})
        assert status == 403
        # Unknown paths and plans are 404s.
        assert fetch(url + "nothing")[0] == 404
        assert fetch(url + "plan/nope")[0] == 404
        assert fetch(url + "events/plan/nope")[0] == 404


def test_logs_only_from_forges_own_folders_and_capped(ran: Path, tmp_path: Path) -> None:
    logs = ran / ".git" / "forge" / "plans" / "p" / "logs"
    agent_logs = sorted(logs.rglob("*.log"))
    assert agent_logs
    big = logs / "big.log"
    big.write_bytes(b"x" * (3 << 20) + b"\nthe end\n")
    outside = tmp_path / "secret.txt"
    outside.write_text("secret")
    (logs / "link.log").symlink_to(outside)
    with serving(ran) as url:
        _, page, _ = fetch(url + "plan/p")
        linked = re.findall(r'href="(/log\?path=[^"]+)"', page)
        assert linked, "the page links its logs through the server"
        status, body, headers = fetch(url + linked[0].replace("&amp;", "&"))
        assert status == 200 and headers["Content-Type"].startswith("text/plain")
        status, body, _ = fetch(url + "log?path=" + quote(str(big)))
        assert status == 200 and body.endswith("the end\n") and len(body) < (1 << 20) + 200
        assert body.startswith("forge: the first")
        for path in (
            str(outside),
            "/etc/passwd",
            str(logs / ".." / ".." / ".." / ".." / "config"),  # .git/config: not forge's
            str(logs / "link.log"),  # a link that leads out
            "relative.log",
            "",
        ):
            status, body, _ = fetch(url + "log?path=" + quote(path))
            assert status == 404 and "secret" not in body, path


def test_another_host_needs_the_token_on_every_request(ran: Path) -> None:
    with serving(ran, "--host", "0.0.0.0") as url:
        assert "?token=" in url
        token = url.split("?token=")[1]
        bare = url.split("?")[0].replace("0.0.0.0", "127.0.0.1")
        port = urlsplit(bare).port
        status, said, _ = fetch(bare, headers={"Host": f"0.0.0.0:{port}"})
        assert status == 403 and "token" in said
        for path in ("", "plan/p", "events", "log?path=x"):
            assert fetch(bare + path)[0] == 403, path
        status, _, headers = fetch(f"{bare}plan/p?token={token}")
        assert status == 200 and "HttpOnly" in headers["Set-Cookie"]
        cookie = headers["Set-Cookie"].split(";")[0]
        assert fetch(bare + "plan/p", headers={"Cookie": cookie})[0] == 200
        assert fetch(bare + "plan/p", headers={"Cookie": "forge_token=wrong"})[0] == 403


def test_hold_resume_and_retry_from_the_page(ran: Path) -> None:
    events_log = ran / ".git" / "forge" / "plans" / "p" / "logs" / "events.log"
    with serving(ran) as url:
        _, page, _ = fetch(url + "plan/p")
        token = {"X-Forge-Token": token_of(page)}
        assert 'data-action="/plan/p/retry/bad"' in page
        status, said, _ = fetch(url + "plan/p/hold", method="POST", headers=token)
        assert status == 200 and "hold set" in said
        cp = run_forge(ran, "status", "p")
        assert "(web)" in cp.stdout, cp.stdout  # who held it: the user, from the page
        status, said, _ = fetch(url + "plan/p/resume", method="POST", headers=token)
        assert status == 200 and "hold removed" in said
        status, said, _ = fetch(url + "plan/p/retry/a", method="POST", headers=token)
        assert status == 409 and "has not failed" in said
        status, said, _ = fetch(url + "plan/p/retry/bad", method="POST", headers=token)
        assert status == 200 and "retry of 'bad' started" in said
        log = Path(said.split("output in ")[1].rstrip(")\n"))
        wait_for(lambda: "bad" in log.read_text() and "exit" in log.read_text(), what="the retry")
    text = events_log.read_text()
    assert "web: hold set" in text and "web: hold removed" in text and "web: retry" in text
    wait_for(lambda: "attempt" in run_forge(ran, "status", "p", "bad").stdout)
    history = json.loads(run_forge(ran, "status", "p", "bad", "--json").stdout)["history"]
    assert len(history) == 2  # the first attempt and the page's retry


def test_a_journal_of_a_newer_forge_says_upgrade(ran: Path) -> None:
    folder = ran / ".git" / "forge" / "plans" / "p"
    snapshot = json.loads((folder / "state.json").read_text())
    journal = folder / f"state-journal-{snapshot['journal']}.jsonl"
    with journal.open("a") as fh:
        fh.write(json.dumps({"kind": "SomethingNew", "task": "a"}) + "\n")
    with serving(ran) as url:
        status, page, _ = fetch(url + "plan/p")
        assert status == 200 and "upgrade forge" in page
        status, index, _ = fetch(url)
        assert status == 200 and "upgrade forge" in index


def test_bad_options_are_one_line_and_exit_2(repo: Path) -> None:
    cp = run_forge(repo, "serve", "--port", "70000")
    assert cp.returncode == 2 and "Traceback" not in cp.stderr
    cp = run_forge(repo, "serve", "--host", " ")
    assert cp.returncode == 2 and cp.stderr.strip().startswith("forge: --host needs")
    with serving(repo) as url:
        port = str(urlsplit(url).port)
        cp = run_forge(repo, "serve", "--port", port)
        assert cp.returncode == 2 and f"cannot serve on 127.0.0.1:{port}" in cp.stderr
        assert "Traceback" not in cp.stderr


def test_run_serve_serves_beside_the_run_and_after_it(repo: Path, tmp_path: Path) -> None:
    plan_file = write_plan(tmp_path, plan(shell("a"), shell("b", deps=["a"])))
    assert run_forge(repo, "plan", str(plan_file)).returncode == 0
    proc = spawn_forge(repo, "run", "p", "--serve")
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        found = re.search(r"(http://\S+)", line)
        assert found and "serving" in line, line
        url = found.group(1)
        wait_for(lambda: "still serving" in proc.stderr.readline() if proc.stderr else False)
        status, page, _ = fetch(url + "plan/p")
        assert status == 200 and page.count(">MERGED<") >= 2, page[:300]
        assert proc.poll() is None  # it serves the final state until stopped
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=20)
    assert proc.returncode == 0
    assert "merged" in (proc.stdout.read() if proc.stdout else "")


def test_the_report_is_the_live_pages_sections(ran: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    assert run_forge(ran, "report", "p", "-o", str(out)).returncode == 0
    static = out.read_text()
    with serving(ran) as url:
        _, live = fetch(url + "plan/p")[:2]
    ids = re.compile(r'<div id="s-([a-z]+)">')
    assert ids.findall(live) == ["live", *ids.findall(static)]
    assert ids.findall(static)[:3] == ["head", "dag", "timeline"]
    for part in ("<h2>Tasks by wave</h2>", "<h2>Gate now</h2>", "<h2>Tasks and attempts</h2>"):
        assert part in static and part in live
    assert "<script" not in static and 'href="/log?path=' not in static
    assert static.split("<body>")[0] == live.split("<body>")[0]  # the same head and style
