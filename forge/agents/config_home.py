"""A per-task config folder that keeps the user's configuration.

Parallel runs of one CLI must not share its sessions, history and lock files
(Claude Code corrupts a shared `.claude.json`, Codex's SQLite state contends),
so each task gets a folder of its own (`isolate_env`). But the user's folder
also holds their settings: a Codex model provider in `config.toml`, a gateway's
`ANTHROPIC_BASE_URL` under `env` in Claude's `settings.json`, Gemini's chosen
auth method. Dropping them sends the CLI elsewhere (or nowhere), so the
per-task folder links every entry of the user's folder except the per-task
state, which starts empty (or, for a state file that also holds settings, as a
copy). Links, not copies, for the rest: a setting the user changes reaches the
next attempt, and nothing of theirs is duplicated.

The layouts are the CLIs' (Claude Code 2.1, Codex CLI 0.17x, Gemini CLI 0.6x).
A variable forge does not know is handled the same way with nothing private:
when the user has set it, every entry of their folder is linked.
"""

from __future__ import annotations

import contextlib
import fnmatch
import os
import shutil
from collections.abc import Mapping
from pathlib import Path

from forge.frozen import frozen


@frozen
class Layout:
    """Where a CLI keeps its config when the variable is unset, and what in it
    belongs to one run."""

    default: str  # the folder the variable replaces, when unset ("~/.codex")
    sub: str = ""  # the config sits in this subfolder of it (Gemini: `.gemini`)
    private: tuple[str, ...] = ()  # globs of entries that start empty per task
    copied: tuple[str, ...] = ()  # entries copied: state files that also hold settings
    # Files that live outside the folder when the variable is unset, and the
    # name they take inside it when it is set (Claude: ~/.claude.json).
    outside: tuple[tuple[str, str], ...] = ()


LAYOUTS: dict[str, Layout] = {
    "CLAUDE_CONFIG_DIR": Layout(
        default="~/.claude",
        private=(
            "projects",  # transcripts
            "sessions",  # one file per running process
            "backups",  # of .claude.json, written by each run
            "telemetry",
            "paste-cache",
            "todos",
            "shell-snapshots",
            "session-env",
            "file-history",
            "statsig",
            "debug",
            "ide",
            "history.jsonl",
            "*.lock",
            # Login tokens rotate: a task that refreshed a shared one would log the
            # user out. Isolation applies only with a key in the environment anyway.
            ".credentials.json",
        ),
        copied=(".claude.json",),  # the file parallel runs corrupt; it holds settings too
        outside=(("~/.claude.json", ".claude.json"),),
    ),
    "CODEX_HOME": Layout(
        default="~/.codex",
        private=(
            "sessions",
            "archived_sessions",
            "history.jsonl",
            "log",
            ".tmp",
            "shell_snapshots",
            "thread-writer-locks",
            "*.sqlite",
            "*.sqlite-*",
            "*.db",
            "*.lock",
            "tmp",
        ),
    ),
    "GEMINI_CLI_HOME": Layout(
        default="~",
        sub=".gemini",
        # Chats, checkpoints (a shadow git repo), the folder-to-project map.
        private=("tmp", "history", "projects.json", "*.lock"),
    ),
}


def user_folder(var: str, environ: Mapping[str, str]) -> Path | None:
    """The user's own folder behind `var` (None when unknown and unset)."""
    layout = LAYOUTS.get(var)
    value = environ.get(var)
    if value:
        folder = Path(value).expanduser()
    elif layout is not None:
        home = Path(environ.get("HOME") or os.path.expanduser("~"))
        folder = home if layout.default == "~" else home / layout.default.removeprefix("~/")
    else:
        return None
    return folder / layout.sub if layout and layout.sub else folder


def populate(var: str, task_folder: Path, environ: Mapping[str, str]) -> None:
    """Make `task_folder` (the value `var` gets for one task) hold the user's
    configuration: links to their entries, copies of the `copied` ones, and
    nothing of the private ones. Idempotent: an entry already there is kept."""
    layout = LAYOUTS.get(var, Layout(default=""))
    source = user_folder(var, environ)
    target = task_folder / layout.sub if layout.sub else task_folder
    target.mkdir(parents=True, exist_ok=True)
    for entry in target.iterdir():
        # A link an older layout made to what is now per task (a session folder).
        if entry.is_symlink() and any(fnmatch.fnmatchcase(entry.name, p) for p in layout.private):
            entry.unlink()
    if source is None or not source.is_dir() or _same(source, target):
        return
    for entry in sorted(source.iterdir()):
        name = entry.name
        if any(fnmatch.fnmatchcase(name, p) for p in layout.private):
            continue
        if any(fnmatch.fnmatchcase(name, p) for p in layout.copied):
            _copy(entry, target / name)
        else:
            _link(entry, target / name)
    if not environ.get(var):
        home = Path(environ.get("HOME") or os.path.expanduser("~"))
        for where, name in layout.outside:
            _copy(home / where.removeprefix("~/"), target / name)


def _same(a: Path, b: Path) -> bool:
    with contextlib.suppress(OSError):
        return a.resolve() == b.resolve()
    return False


def _link(src: Path, dst: Path) -> None:
    if dst.is_symlink() or dst.exists():
        return
    with contextlib.suppress(OSError):  # a racing attempt of the same task made it
        os.symlink(src, dst)


def _copy(src: Path, dst: Path) -> None:
    if dst.exists() or not src.is_file():
        return
    tmp = dst.with_name(f".{dst.name}.forge-tmp")
    with contextlib.suppress(OSError):
        shutil.copy2(src, tmp)
        os.replace(tmp, dst)
