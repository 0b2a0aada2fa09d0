"""A repository whose remote `origin` is a bare repository served by a scripted
GitHub (tests/helpers/github.py), with `[host]` in its forge.toml pointing at it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.github import NAME, OWNER, TOKEN, GitHubScript, GitHubServer, make_certificate
from helpers.gitkit import commit_all, git


@pytest.fixture
def hub(repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[GitHubServer]:
    certs = tmp_path / "certs"
    certs.mkdir()
    cert, key = make_certificate(certs)
    bare = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(bare))
    server = GitHubServer(GitHubScript(bare=bare), cert, key)
    (repo / "forge.toml").write_text(
        f'[host]\napi = "{server.api}"\nrepo = "{OWNER}/{NAME}"\npoll = "0.1s"\n'
        'checks_within = "2s"\ntimeout = "5s"\nwait = "3s"\n'
    )
    commit_all(repo, "forge.toml")
    git(repo, "remote", "add", "origin", str(bare))
    git(repo, "push", "-q", "origin", "main")
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    monkeypatch.setenv("GH_ENTERPRISE_TOKEN", TOKEN)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    for var in ("GH_TOKEN", "GITHUB_TOKEN", "GITHUB_ENTERPRISE_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    yield server
    server.close()
