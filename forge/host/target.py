"""Which host and repository a remote names, and where that host's API is.

`https://github.com/OWNER/NAME.git`, `git@github.com:OWNER/NAME.git` and
`ssh://git@github.com/OWNER/NAME` name github.com (API `https://api.github.com`);
any other host is GitHub Enterprise only when `[host] api` says where its API is
(an Enterprise API is `https://HOST/api/v3`). A remote that is a path names no
host: `[host] api` and `[host] repo` say both."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from forge.errors import ForgeError
from forge.frozen import frozen
from forge.plan.cluster_table import HostTable

GITHUB = "github.com"
GITHUB_API = "https://api.github.com"
_SCP = re.compile(r"^(?:[^@/]+@)?(?P<host>[^:/]+):(?P<path>[^/].*)$")  # git@host:owner/name


@frozen
class HostTarget:
    host: str  # the API's host (host:port): what tokens are looked up for
    api: str  # the REST API's base URL
    owner: str
    name: str
    enterprise: bool  # not github.com: GH_ENTERPRISE_TOKEN, `gh auth token --hostname`

    @property
    def slug(self) -> str:
        return f"{self.owner}/{self.name}"

    @property
    def graphql(self) -> str:
        return GITHUB_API + "/graphql" if not self.enterprise else _graphql_of(self.api)


def _graphql_of(api: str) -> str:
    return api.removesuffix("/v3") + "/graphql" if api.endswith("/api/v3") else api + "/graphql"


def remote_parts(url: str) -> tuple[str, str] | None:
    """(host, OWNER/NAME) of a remote URL; None for a path."""
    if "://" in url:
        parts = urlsplit(url)
        if parts.scheme == "file" or not parts.hostname:
            return None
        host = parts.hostname + (f":{parts.port}" if parts.port else "")
        path = parts.path
    else:
        match = _SCP.match(url)
        if match is None:
            return None
        host, path = match["host"], match["path"]
    path = path.strip("/").removesuffix(".git")
    return (host, path) if path.count("/") == 1 else None


def target_of(remote: str, url: str, table: HostTable) -> HostTarget:
    """The host and repository `remote` (at `url`) names, by `[host]` where it says."""
    found = remote_parts(url)
    slug = table.repo or (found[1] if found else None)
    if table.api is not None:
        host = urlsplit(table.api).netloc
        if slug is None:
            raise ForgeError(
                f"remote '{remote}' ({shown_url(url)}) names no repository: set "
                '[host] repo = "OWNER/NAME" in forge.toml'
            )
        owner, name = slug.split("/")
        return HostTarget(host, table.api, owner, name, enterprise=host != "api.github.com")
    if found is None or found[0] != GITHUB:
        raise ForgeError(
            f"remote '{remote}' ({shown_url(url)}) is not on GitHub (github.com); for GitHub "
            'Enterprise set [host] api = "https://HOST/api/v3" in forge.toml'
        )
    owner, name = (slug or found[1]).split("/")
    return HostTarget(GITHUB, GITHUB_API, owner, name, enterprise=False)


def shown_url(url: str) -> str:
    """`url` without a user or password it may carry: a remote's URL is said, its
    credentials never."""
    if "://" not in url:
        return url
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return parts._replace(netloc=parts.netloc.rpartition("@")[2]).geturl()
