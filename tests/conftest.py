"""Hermetic test kit: real git repositories in tmp_path, no user or system config."""

from __future__ import annotations

import compileall
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from helpers.gitkit import commit_all, git

if TYPE_CHECKING:
    from helpers.github import GitHubServer

FORGE = Path(__file__).resolve().parents[1] / "forge"


@pytest.fixture(scope="session", autouse=True)
def bytecode() -> None:
    """forge's modules compiled once for the session: every test starts `forge`
    processes, and where PYTHONDONTWRITEBYTECODE is set (or after an edit) each of
    them would compile the package again from source. Only stale files are written."""
    compileall.compile_dir(FORGE, quiet=1)


@pytest.fixture(autouse=True)
def hermetic(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Iterator[None]:
    home = tmp_path_factory.mktemp("home")
    layers = os.environ.get("FORGE_TEST_LAYERS", "off")
    for var in list(os.environ):
        if var.startswith(("GIT_", "FORGE_")):
            monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("XDG_STATE_HOME", str(home / ".local" / "state"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("GIT_AUTHOR_NAME", "Test Author")
    monkeypatch.setenv("GIT_AUTHOR_EMAIL", "author@example.com")
    monkeypatch.setenv("GIT_COMMITTER_NAME", "Test Committer")
    monkeypatch.setenv("GIT_COMMITTER_EMAIL", "committer@example.com")
    monkeypatch.setenv("GIT_AUTHOR_DATE", "2026-01-01T00:00:00+00:00")
    monkeypatch.setenv("GIT_COMMITTER_DATE", "2026-01-01T00:00:00+00:00")
    monkeypatch.setenv("GIT_EDITOR", "false")
    monkeypatch.setenv("FORGE_WORKTREES", str(tmp_path_factory.mktemp("worktrees")))
    monkeypatch.setenv("FORGE_GRACE", "0.5")  # agents stopped in tests need no 5 s grace
    # Without the sandbox unless a test (or its plan) asks: the same on a machine with
    # bubblewrap and without (tests/run/contain/test_default_mode.py leaves it unset).
    monkeypatch.setenv("FORGE_SANDBOX", "off")
    # Verification checkouts as the old pool of checkouts unless a test (or the
    # suite's caller: FORGE_TEST_LAYERS=on) asks for layers (tests/verify/test_layers.py
    # runs both ways).
    monkeypatch.setenv("FORGE_LAYERS", layers)
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.setenv("COLUMNS", "200")
    yield


@pytest.fixture
def unboxed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Commands run without the sandbox run without a box too (forge/base/box.py), as
    where no namespace can be made: for a test whose commands write down `$$`, which
    names a process of the machine only outside a pid namespace."""
    monkeypatch.setenv("FORGE_BOX", "off")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A real repository with one commit on `main`."""
    path = tmp_path / "repo"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    (path / "README.md").write_text("# test repo\n")
    (path / "src").mkdir()
    (path / "src" / "app.py").write_text("VALUE = 1\n")
    commit_all(path, "initial")
    return path


@pytest.fixture
def hub(repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[GitHubServer]:
    """`repo` with a scripted GitHub as its `origin` (tests/helpers/github.py), its
    certificate trusted and a token for it in the environment."""
    from helpers.github import TOKEN, serve_remote

    server = serve_remote(repo, tmp_path)
    monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "certs" / "cert.pem"))
    monkeypatch.setenv("GH_ENTERPRISE_TOKEN", TOKEN)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    for var in ("GH_TOKEN", "GITHUB_TOKEN", "GITHUB_ENTERPRISE_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    yield server
    server.close()
