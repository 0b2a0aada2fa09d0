"""The tables of forge.toml that name what forge reaches beyond this machine.

`[cluster]`: where the scheduler is, the git remote its workers reach, and how the
scheduler is reached (TLS certificates, or `insecure = true`).

`[host]`: the code host `forge pr` hands verified work to. `api` names a GitHub
Enterprise API (`https://ghe.example.com/api/v3`); `repo` (`OWNER/NAME`) names the
repository when the remote's URL does not (a path); `timeout` bounds one call,
`wait` how long a rate limit is waited out, `poll` the interval of `forge pr
--watch`, `checks_within` how long it waits for a first check."""

from __future__ import annotations

from forge.base.durations import parse_duration
from forge.base.tomlread import Problems
from forge.frozen import frozen

KEYS = ("address", "remote", "tls_ca", "tls_cert", "tls_key", "insecure")
TLS_KEYS = ("tls_ca", "tls_cert", "tls_key")


@frozen
class ClusterTable:
    address: str | None = None  # tcp://host:8786, tls://host:8786 or local:N
    remote: str | None = None  # a git URL or path the workers reach
    tls: tuple[str, str, str] | None = None  # CA, certificate and key files
    insecure: bool = False  # a scheduler reached without TLS is accepted


def parse_cluster(table: object, problems: Problems, line: int | None) -> ClusterTable:
    """`[cluster] address = "tls://host:8786"`, `remote = "ssh://..."` (or a path),
    `tls_ca`, `tls_cert`, `tls_key` (files; all three or none), `insecure = true`."""
    if not isinstance(table, dict):
        problems.add("[cluster] must be a table", line=line)
        return ClusterTable()
    for key in table:
        if key not in KEYS:
            problems.add(f"[cluster]: unknown key `{key}` (known: {', '.join(KEYS)})", line=line)
    values: dict[str, str | None] = {}
    for key in ("address", "remote", *TLS_KEYS):
        value = table.get(key)
        if value is not None and (not isinstance(value, str) or not value.strip()):
            problems.add(f"[cluster] {key} must be a non-empty string", line=line)
            value = None
        values[key] = value
    tls = tuple(values[k] for k in TLS_KEYS)
    if any(tls) and not all(tls):
        problems.add(
            "[cluster] tls_ca, tls_cert and tls_key go together: give all three", line=line
        )
    insecure = table.get("insecure", False)
    if not isinstance(insecure, bool):
        problems.add("[cluster] insecure must be true or false", line=line)
        insecure = False
    return ClusterTable(
        address=values["address"],
        remote=values["remote"],
        tls=(str(tls[0]), str(tls[1]), str(tls[2])) if all(tls) else None,
        insecure=insecure,
    )


HOST_KEYS = ("api", "repo", "timeout", "wait", "poll", "checks_within")
_DURATIONS = {"timeout": 30.0, "wait": 300.0, "poll": 15.0, "checks_within": 600.0}


@frozen
class HostTable:
    api: str | None = None  # the REST API's base URL (None: from the remote's host)
    repo: str | None = None  # OWNER/NAME when the remote's URL does not say it
    timeout: float = _DURATIONS["timeout"]  # seconds one call to the host may take
    wait: float = _DURATIONS["wait"]  # seconds a rate limit with a reset time is waited out
    poll: float = _DURATIONS["poll"]  # seconds between two looks of `forge pr --watch`
    checks_within: float = _DURATIONS["checks_within"]  # a first check, or it is said


def parse_host(table: object, problems: Problems, line: int | None) -> HostTable:
    if not isinstance(table, dict):
        problems.add("[host] must be a table", line=line)
        return HostTable()
    for key in table:
        if key not in HOST_KEYS:
            problems.add(f"[host]: unknown key `{key}` (known: {', '.join(HOST_KEYS)})", line=line)
    texts: dict[str, str | None] = {}
    for key in ("api", "repo"):
        value = table.get(key)
        if value is not None and (not isinstance(value, str) or not value.strip()):
            problems.add(f"[host] {key} must be a non-empty string", line=line)
            value = None
        texts[key] = value.strip().rstrip("/") if isinstance(value, str) else None
    api = texts["api"]
    if api is not None and not api.startswith(("https://", "http://")):
        problems.add(f"[host] api must be an https:// URL, got {api!r}", line=line)
    repo = texts["repo"]
    if repo is not None and repo.count("/") != 1:
        problems.add(f"[host] repo must be OWNER/NAME, got {repo!r}", line=line)
    seconds = dict(_DURATIONS)
    for key in _DURATIONS:
        if key in table:
            try:
                seconds[key] = parse_duration(table[key])
            except ValueError as exc:
                problems.add(f"[host] {key}: {exc}", line=line)
    return HostTable(
        api=api,
        repo=repo,
        timeout=seconds["timeout"],
        wait=seconds["wait"],
        poll=seconds["poll"],
        checks_within=seconds["checks_within"],
    )
