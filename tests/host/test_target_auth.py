"""Which host a remote names, which token speaks to it, and how a push carries it:
the token only ever in the push's own environment."""

from __future__ import annotations

import base64

import pytest

from forge.errors import ForgeError
from forge.host.auth import Token, find_token, push_env
from forge.host.target import remote_parts, shown_url, target_of
from forge.plan.cluster_table import HostTable


@pytest.mark.parametrize(
    ("url", "parts"),
    [
        ("https://github.com/octo/app.git", ("github.com", "octo/app")),
        ("git@github.com:octo/app.git", ("github.com", "octo/app")),
        ("ssh://git@github.com/octo/app", ("github.com", "octo/app")),
        ("https://ghe.example.com:8443/octo/app.git", ("ghe.example.com:8443", "octo/app")),
        ("/srv/git/app.git", None),
        ("file:///srv/git/app.git", None),
        ("https://github.com/octo", None),
    ],
)
def test_remote_parts(url: str, parts: tuple[str, str] | None) -> None:
    assert remote_parts(url) == parts


def test_github_com_and_enterprise_targets() -> None:
    public = target_of("origin", "git@github.com:octo/app.git", HostTable())
    assert (public.api, public.slug, public.enterprise) == (
        "https://api.github.com",
        "octo/app",
        False,
    )
    assert public.graphql == "https://api.github.com/graphql"
    ghe = target_of(
        "origin",
        "https://ghe.example.com/octo/app.git",
        HostTable(api="https://ghe.example.com/api/v3"),
    )
    assert (ghe.host, ghe.enterprise, ghe.graphql) == (
        "ghe.example.com",
        True,
        "https://ghe.example.com/api/graphql",
    )
    with pytest.raises(ForgeError, match="is not on GitHub"):
        target_of("origin", "https://gitlab.com/octo/app.git", HostTable())
    with pytest.raises(ForgeError, match=r"names no repository: set \[host\] repo"):
        target_of("origin", "/srv/app.git", HostTable(api="https://ghe.example.com/api/v3"))


def test_a_url_is_said_without_its_credentials() -> None:
    assert shown_url("https://me:secret@github.com/o/a.git") == "https://github.com/o/a.git"


def test_tokens_are_found_as_gh_finds_them(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")  # no `gh` to ask
    public = target_of("origin", "https://github.com/o/a.git", HostTable())
    ghe = target_of(
        "o", "https://ghe.example.com/o/a.git", HostTable(api="https://ghe.example.com/api/v3")
    )
    env = {"GITHUB_TOKEN": "b", "GH_TOKEN": "a", "GITHUB_ENTERPRISE_TOKEN": "d"}
    assert find_token(public, env).source == "GH_TOKEN"
    assert find_token(ghe, env).source == "GITHUB_ENTERPRISE_TOKEN"
    with pytest.raises(ForgeError, match=r"no token for github\.com: set GH_TOKEN or GITHUB_TOKEN"):
        find_token(public, {})
    assert "secret" not in repr(Token("secret", "GH_TOKEN"))
    assert Token("ghs_abc", "GITHUB_TOKEN").from_actions
    assert not Token("ghp_abc", "GH_TOKEN").from_actions


def test_a_push_carries_the_token_in_its_environment_only() -> None:
    token = Token("ghp_x", "GH_TOKEN")
    env = push_env(token, "https://ghe.example.com:8443/o/a.git", {"GIT_CONFIG_COUNT": "2"})
    assert env["GIT_CONFIG_COUNT"] == "3"
    assert env["GIT_CONFIG_KEY_2"] == "http.https://ghe.example.com:8443/.extraHeader"
    basic = base64.b64encode(b"x-access-token:ghp_x").decode()
    assert env["GIT_CONFIG_VALUE_2"] == f"Authorization: Basic {basic}"
    assert push_env(token, "git@github.com:o/a.git", {}) == {}
    assert push_env(token, "/srv/a.git", {}) == {}
