"""The person's credentials, kept out of a sandboxed command's sight: the files and
folders where the usual tools keep a key or a token are covered (an empty folder,
an empty file), and git's global configuration is seen as a read-only copy
without credential helpers and without extra HTTP headers (where a CI checkout
keeps its token). The code host's tokens in the environment are dropped from
every task's, check's and lane's, sandboxed or not (`forge.base.proc.HOST_TOKENS`).
"""

from __future__ import annotations

import functools
import os
import subprocess
from collections.abc import Mapping
from pathlib import Path

# Relative to the home folder: keys, tokens and the stores credential helpers read.
SECRETS = (
    ".ssh",
    ".gnupg",
    ".git-credentials",
    ".config/git/credentials",
    ".netrc",
    ".config/gh",
    ".config/hub",
    ".config/glab-cli",
    ".aws",
    ".azure",
    ".config/gcloud",
    ".docker",
    ".kube",
    ".pypirc",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".gem/credentials",
    ".vault-token",
    ".password-store",
    ".local/share/keyrings",
    ".terraform.d/credentials.tfrc.json",
)


def secrets(home: Path) -> list[Path]:
    """The credential files and folders that exist under `home`."""
    return [home / name for name in SECRETS if (home / name).exists()]


def git_configs(home: Path, env: Mapping[str, str]) -> list[Path]:
    """git's global configuration files that exist (each as the file it really is:
    a bind covers the target, not a link to it)."""
    xdg = Path(env.get("XDG_CONFIG_HOME") or home / ".config")
    found = [xdg / "git" / "config", home / ".gitconfig"]
    if env.get("GIT_CONFIG_GLOBAL"):
        found.append(Path(env["GIT_CONFIG_GLOBAL"]).expanduser())
    out: list[Path] = []
    for path in found:
        real = path.resolve()
        if real.is_file() and real not in out:
            out.append(real)
    return out


def without_helpers(path: Path, into: Path) -> Path:
    """Write into `into` a copy of the git config `path` without its credential
    sections and extra HTTP headers; the copy's path."""
    st = path.stat()
    data = _sanitized(str(path), st.st_size, st.st_mtime_ns)
    into.parent.mkdir(parents=True, exist_ok=True)
    into.write_bytes(data)
    return into


@functools.lru_cache(maxsize=16)
def _sanitized(path: str, _size: int, _mtime: int) -> bytes:
    """The sanitized bytes of the config at `path` (cached while it is unchanged)."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="forge-gitconfig-") as where:
        copy = Path(where) / "config"
        copy.write_bytes(Path(path).read_bytes())
        names = _git(copy, "--name-only", "--list").splitlines()
        sections = sorted({n.rsplit(".", 1)[0] for n in names if n.startswith("credential.")})
        for section in sections:
            _git(copy, "--remove-section", section)
        for name in {n for n in names if n.lower().endswith(".extraheader")}:
            _git(copy, "--unset-all", name)
        return copy.read_bytes()


def _git(config: Path, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env["GIT_CONFIG_NOSYSTEM"] = "1"
    cp = subprocess.run(
        ["git", "config", "--file", str(config), *args],
        capture_output=True,
        text=True,
        env=env,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    return cp.stdout
