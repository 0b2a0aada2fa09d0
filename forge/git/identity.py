"""Who forge commits as: the user when git knows who that is, else forge itself.

Shared by every commit forge writes (merges, salvage), so it has one home.
"""

from __future__ import annotations

from forge.git.repo import Repository

_IDENTITY: dict[str, dict[str, str]] = {}


def identity_env(repo: Repository) -> dict[str, str]:
    """forge commits as the user when git knows who that is, else as forge itself
    (a fresh machine with no user.name must not make every task fail)."""
    key = str(repo.common_dir)
    if key not in _IDENTITY:
        env: dict[str, str] = {}
        for role in ("AUTHOR", "COMMITTER"):
            if repo.try_git("var", f"GIT_{role}_IDENT").returncode != 0:
                env[f"GIT_{role}_NAME"] = "forge"
                env[f"GIT_{role}_EMAIL"] = "forge@localhost"
        _IDENTITY[key] = env
    return _IDENTITY[key]
