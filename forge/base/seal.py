"""Seals on forge's records: an HMAC with a key kept outside every repository.

A verification record or verdict cache entry lives under the repository's git dir,
where anything running as the user can write. A remembered verdict is honoured only
when its record carries a seal made with forge's key, so a record copied under
another tree, or written by a task, is re-verified instead of believed.

The key is `$XDG_STATE_HOME/forge/key` (default `~/.local/state/forge/key`), 32
random bytes made on first use, mode 0600. A task cannot read it: the sandbox, or
outside it the box (forge/base/box.py), hides the folder; only where no namespace
can be made does a task, running as the user, read it (`forge doctor` says so).
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TypeGuard

FIELD = "seal"
_cache: dict[Path, bytes] = {}


def key_dir() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "forge"


def key() -> bytes | None:
    """forge's key, made on first use; None when it can neither be read nor made
    (then nothing is sealed, and no remembered verdict is honoured)."""
    path = key_dir() / "key"
    cached = _cache.get(path)
    if cached is not None:
        return cached
    with contextlib.suppress(FileNotFoundError):
        return _read(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another forge process made it first
        return _read(path)
    except OSError:
        return None
    with os.fdopen(fd, "w") as fh:
        fh.write(os.urandom(32).hex() + "\n")
    return _read(path)


def _read(path: Path) -> bytes | None:
    try:
        text = path.read_text().strip()
    except OSError as exc:
        if isinstance(exc, FileNotFoundError):
            raise
        return None
    if len(text) < 32:
        return None  # a key file being written right now, or truncated
    _cache[path] = text.encode()
    return _cache[path]


def _digest(secret: bytes, data: Mapping[str, object]) -> str:
    body = {k: v for k, v in data.items() if k != FIELD}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hmac.new(secret, text.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()


def sealed(data: Mapping[str, object]) -> dict[str, object]:
    """`data` with a seal over everything else in it (unsealed without a key)."""
    secret = key()
    body = {k: v for k, v in data.items() if k != FIELD}
    if secret is not None:
        body[FIELD] = _digest(secret, body)
    return body


def valid(data: object) -> TypeGuard[Mapping[str, object]]:
    """Was this dict sealed by forge with its key, and not changed since?"""
    if not isinstance(data, dict) or not isinstance(data.get(FIELD), str):
        return False
    secret = key()
    return secret is not None and hmac.compare_digest(str(data[FIELD]), _digest(secret, data))
