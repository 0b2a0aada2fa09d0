"""A sandboxed lane that fails for want of the network is named for it: `no network
in the sandbox (`network = true` gives it)`, and no task is blamed."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.runkit import plan_and_run, statuses, write_plan

from forge.base import sandbox
from forge.verify import offline

pytestmark = pytest.mark.skipif(
    sandbox.unavailable() is not None, reason=f"no sandbox here: {sandbox.unavailable()}"
)


@pytest.fixture
def listener() -> Iterator[int]:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    yield server.getsockname()[1]
    server.close()


def test_a_lane_without_the_network_is_named_for_it(
    repo: Path, tmp_path: Path, listener: int
) -> None:
    reach = f"python3 -c \"import socket; socket.create_connection(('127.0.0.1', {listener}), 5)\""
    body = (
        f"sandbox = true\nverify = '''{reach}'''\n"
        '[[task]]\nid = "a"\nfiles = ["a.txt"]\nrun = "echo a > a.txt"\n'
    )
    cp = plan_and_run(repo, write_plan(tmp_path, body))
    out = cp.stdout + cp.stderr
    assert f"lane verify: {offline.SAID}" in out, out
    assert statuses(repo) == {"a": "QUEUED"}, out  # it fails on the head too: nobody blamed


def test_the_words_of_a_refused_connection_or_a_failed_lookup(tmp_path: Path) -> None:
    log = tmp_path / "lane.log"
    for said, offline_ in [
        ("ConnectionRefusedError: [Errno 111] Connection refused", True),
        ("curl: (6) Could not resolve host: pypi.org", True),
        ("socket.gaierror: [Errno -3] Temporary failure in name resolution", True),
        ("npm ERR! getaddrinfo EAI_AGAIN registry.npmjs.org", True),
        ("AssertionError: 1 != 2", False),
    ]:
        log.write_text(f"collected 3 items\n{said}\n")
        assert offline.said_offline(log) is offline_, said
    assert offline.said_offline(tmp_path / "gone.log") is False
