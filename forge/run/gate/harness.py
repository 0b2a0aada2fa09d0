"""A task that changes its own test harness: named in the verdict that lands it.

The harness is what decides how the tests run and what counts as a pass: a
`conftest.py` anywhere, `pytest.ini`, `tox.ini`, pytest's table in `pyproject.toml`
or `setup.cfg`, and forge.toml's `[tests]` and `[verify]`. Such a change is code like
any other (the gate judges it by the whole run), but a person reading the verdict
should know the rules changed with it.
"""

from __future__ import annotations

from pathlib import PurePosixPath

from forge.git.repo import Repository

_ALWAYS = {"conftest.py", "pytest.ini", "tox.ini"}
# files that hold a harness among other things: named when the change is in it
_PARTLY = {
    "pyproject.toml": ("pytest",),
    "setup.cfg": ("pytest",),
    "forge.toml": ("[tests", "[verify"),
}


def changed(repo: Repository, before: str, after: str) -> list[str]:
    """The harness files the change from `before` to `after` touches."""
    cp = repo.try_git("diff", "--name-only", "--no-renames", before, after)
    if cp.returncode != 0:
        return []
    out = []
    for path in cp.stdout.splitlines():
        name = PurePosixPath(path).name
        partly = name in _PARTLY and _mentions(repo, before, after, path, _PARTLY[name])
        if name in _ALWAYS or partly:
            out.append(path)
    return out


def _mentions(repo: Repository, before: str, after: str, path: str, words: tuple[str, ...]) -> bool:
    """Whether a section of the file whose header names the harness (`[tool.pytest...]`,
    `[tests]`) differs between the two commits."""
    old, new = _sections(repo, before, path), _sections(repo, after, path)
    heads = {h for h in (*old, *new) if any(w in h for w in words)}
    return any(old.get(h) != new.get(h) for h in heads)


def _sections(repo: Repository, commit: str, path: str) -> dict[str, str]:
    """An INI or TOML file's text by section header (`""`: before the first)."""
    cp = repo.try_git("show", f"{commit}:{path}")
    out: dict[str, list[str]] = {"": []}
    head = ""
    for line in cp.stdout.splitlines() if cp.returncode == 0 else []:
        if line.lstrip().startswith("["):
            head = line.strip()
            out.setdefault(head, [])
        else:
            out[head].append(line)
    return {h: "\n".join(lines) for h, lines in out.items()}
