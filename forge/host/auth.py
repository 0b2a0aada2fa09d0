"""The token `forge pr` speaks to the host with, found as `gh` finds it, and the
environment a push carries it in.

github.com: `GH_TOKEN`, then `GITHUB_TOKEN`; an Enterprise host:
`GH_ENTERPRISE_TOKEN`, then `GITHUB_ENTERPRISE_TOKEN`; then, for either,
`gh auth token --hostname HOST` when `gh` is installed. The token goes to git only
through `GIT_CONFIG_COUNT`/`GIT_CONFIG_KEY_n`/`GIT_CONFIG_VALUE_n` in the push's
own environment (an `http.extraHeader`): never in a URL, an argument list, a log,
the journal or the report."""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
from collections.abc import Mapping
from urllib.parse import urlsplit

from forge.errors import ForgeError
from forge.frozen import frozen
from forge.host.target import HostTarget

_PUBLIC = ("GH_TOKEN", "GITHUB_TOKEN")
_ENTERPRISE = ("GH_ENTERPRISE_TOKEN", "GITHUB_ENTERPRISE_TOKEN")


@frozen
class Token:
    value: str
    source: str  # where it came from: an environment variable's name, or `gh`

    def __repr__(self) -> str:  # a token printed by accident shows no secret
        return f"Token(source={self.source!r})"

    @property
    def from_actions(self) -> bool:
        """It looks like the GITHUB_TOKEN of a GitHub Actions job (an installation
        token): a push made with it starts no workflow."""
        return self.value.startswith("ghs_")


def find_token(target: HostTarget, env: Mapping[str, str] | None = None) -> Token:
    env = os.environ if env is None else env
    for name in _ENTERPRISE if target.enterprise else _PUBLIC:
        if env.get(name, "").strip():
            return Token(env[name].strip(), name)
    from_gh = _gh_token(target.host)
    if from_gh:
        return Token(from_gh, "gh auth token")
    names = " or ".join(_ENTERPRISE if target.enterprise else _PUBLIC)
    raise ForgeError(
        f"no token for {target.host}: set {names}, or log in with "
        f"`gh auth login --hostname {target.host.partition(':')[0]}`"
    )


def _gh_token(host: str) -> str | None:
    gh = shutil.which("gh")
    if gh is None:
        return None
    try:
        cp = subprocess.run(
            [gh, "auth", "token", "--hostname", host],
            capture_output=True,
            text=True,
            timeout=20,
            stdin=subprocess.DEVNULL,
            env={**os.environ, "GH_PROMPT_DISABLED": "1"},
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    value = cp.stdout.strip()
    return value if cp.returncode == 0 and value else None


def push_env(token: Token, url: str, env: Mapping[str, str] | None = None) -> dict[str, str]:
    """What a push to `url` adds to its environment: the token as an HTTP header of
    requests to that URL's host, after any `GIT_CONFIG_*` already set. Nothing for
    a remote that is not HTTPS (ssh, a path: the person's own credentials)."""
    env = os.environ if env is None else env
    parts = urlsplit(url) if "://" in url else None
    if parts is None or parts.scheme != "https" or not parts.hostname:
        return {}
    try:
        count = int(env.get("GIT_CONFIG_COUNT", "0"))
    except ValueError:
        count = 0
    port = f":{parts.port}" if parts.port else ""
    basic = base64.b64encode(f"x-access-token:{token.value}".encode()).decode()
    return {
        "GIT_CONFIG_COUNT": str(count + 1),
        f"GIT_CONFIG_KEY_{count}": f"http.https://{parts.hostname}{port}/.extraHeader",
        f"GIT_CONFIG_VALUE_{count}": f"Authorization: Basic {basic}",
    }
