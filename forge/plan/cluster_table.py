"""`[cluster]` in forge.toml: where the scheduler is, the git remote its workers
reach, and how the scheduler is reached (TLS certificates, or `insecure = true`)."""

from __future__ import annotations

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
