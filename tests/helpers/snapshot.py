"""What a dry run or a refusal must leave as it was: forge's state folder and refs."""

from __future__ import annotations

from pathlib import Path

from helpers.gitkit import git


def snapshot(repo: Path) -> tuple[dict[str, bytes], str]:
    """Every file under forge's state folder, with its bytes, and every ref."""
    root = repo / ".git" / "forge"
    files = {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }
    return files, git(repo, "for-each-ref", "--format=%(refname) %(objectname)")
