"""The tree a run starts from, read from the host through its layers (the delta
layer over the base layer), as the overlay shows it: a path is the topmost layer's
that holds it; a whiteout hides it, and a whiteout, a file or an opaque folder on
the way hides what the layers below hold under it."""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

from forge.frozen import frozen

_OPAQUE = ("trusted.overlay.opaque", "user.overlay.opaque")


def whiteout(st: os.stat_result) -> bool:
    return stat.S_ISCHR(st.st_mode) and st.st_rdev == 0


def opaque(path: str) -> bool:
    for name in _OPAQUE:
        with contextlib.suppress(OSError):
            if os.getxattr(path, name, follow_symlinks=False) == b"y":
                return True
    return False


def _lstat(path: str) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except OSError:
        return None


@frozen
class Below:
    layers: tuple[Path, ...]  # top first

    def _hides(self, layer: Path, rel: str) -> bool:
        """Whether `layer` hides the layers below it at `rel` (by what lies on the way)."""
        parts = rel.split("/")
        for i in range(1, len(parts)):
            path = os.path.join(layer, *parts[:i])
            st = _lstat(path)
            if st is None:
                return False
            if not stat.S_ISDIR(st.st_mode) or opaque(path):
                return True
        return False

    def find(self, rel: str) -> str | None:
        """Where `rel` is (the topmost layer's), None: not in the tree."""
        for layer in self.layers:
            path = os.path.join(layer, rel)
            st = _lstat(path)
            if st is not None:
                return None if whiteout(st) else path
            if self._hides(layer, rel):
                return None
        return None

    def names(self, rel: str) -> list[str]:
        """What the folder `rel` holds."""
        seen: set[str] = set()
        gone: set[str] = set()
        for layer in self.layers:
            path = os.path.join(layer, rel) if rel else str(layer)
            st = _lstat(path)
            if st is None:
                if rel and self._hides(layer, rel):
                    break
                continue
            if not stat.S_ISDIR(st.st_mode):
                break
            for name in os.listdir(path):
                if name in seen or name in gone:
                    continue
                entry = _lstat(os.path.join(path, name))
                (gone if entry is not None and whiteout(entry) else seen).add(name)
            if opaque(path) or (rel and self._hides(layer, rel)):
                break
        return sorted(seen)

    def files_under(self, rel: str) -> list[str]:
        """The tree's files at or under `rel` (what hiding `rel` deletes)."""
        path = self.find(rel)
        if path is None:
            return []
        if os.path.islink(path) or not os.path.isdir(path):
            return [rel]
        out: list[str] = []
        for name in self.names(rel):
            out += self.files_under(f"{rel}/{name}")
        return out
