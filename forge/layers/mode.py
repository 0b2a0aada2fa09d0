"""Which backend makes verification checkouts here: layers (an overlay mount in a
mount namespace of the run's own) or checkouts (a folder per lane, cleaned between
runs: forge/verify/checkout.py). `FORGE_LAYERS=on` chooses layers where an overlay
can be mounted in a private mount namespace (as root, or in a user namespace), and
says once per run when it cannot; unset or `off`, checkouts. Layers are opt-in in
this release: with them, a repository without a lock file forge recognises runs
`setup` once per tree (its inputs are the whole tree), where checkouts reuse it.

The backend is an interface of three calls (forge/layers/view.py: a run's argv
prefix, what the run changed, its upper layer discarded), so that a backend
cloning files by reflink (btrfs, XFS, APFS) can stand beside the overlay one.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from forge.errors import ForgeError
from forge.frozen import frozen

MODE_VAR = "FORGE_LAYERS"  # "on" (layers where they work), "off" or unset: checkouts
_ON, _OFF = ("1", "on", "true", "yes"), ("0", "off", "false", "no")
_UNSAFE = (",", ":", "\\")  # what an overlay's mount options cannot hold in a path


@frozen
class Mode:
    """How verification checkouts are made, and why."""

    layers: bool
    why: str
    user_ns: bool = False  # the mount is made in a user namespace (not root)
    probed: bool = True  # found by trying a mount (not chosen by a setting)

    @property
    def name(self) -> str:
        return "layers" if self.layers else "checkouts"

    def line(self) -> str:
        """What `forge doctor` and a run say about it."""
        return f"verification checkouts: {self.name} ({self.why})"


def _namespace_argv(user_ns: bool) -> list[str]:
    """`unshare` making a private mount namespace (in a user namespace: not root)."""
    argv = ["unshare", "--mount", "--propagation", "private"]
    if user_ns:
        argv += ["--user", "--map-root-user"]
    return argv


def enter_argv(user_ns: bool, options: str, mount_point: Path) -> list[str]:
    """The prefix that runs a command in a mount namespace of its own, the overlay
    (`options`: lowerdir, upperdir, workdir) mounted at `mount_point` and the
    command's working folder there."""
    script = 'mount -t overlay forge-layer -o "$1" "$2" && cd "$2" && shift 2 && exec "$@"'
    return [
        *_namespace_argv(user_ns),
        "--",
        "sh",
        "-c",
        script,
        "forge-layer",
        options,
        str(mount_point),
    ]


def overlay_options(
    lowers: list[Path], upper: Path | None, work: Path | None, user_ns: bool
) -> str:
    """An overlay's options (no upper layer: read-only, at least two lower ones)."""
    opts = f"lowerdir={':'.join(map(str, lowers))}"
    if upper is not None and work is not None:
        opts += f",upperdir={upper},workdir={work}"
    return opts + (",userxattr" if user_ns else "")


def _try(place: Path, user_ns: bool) -> str | None:
    """Mount an overlay under `place` in a namespace of its own: why it fails (None: it works)."""
    with tempfile.TemporaryDirectory(prefix=".probe-", dir=place) as tmp:
        parts = [Path(tmp) / n for n in ("lower", "upper", "work", "mnt")]
        for p in parts:
            p.mkdir()
        (parts[0] / "seen").write_text("")
        argv = enter_argv(
            user_ns, overlay_options(parts[:1], parts[1], parts[2], user_ns), parts[3]
        )
        try:
            cp = subprocess.run(
                [*argv, "test", "-e", "seen"],
                capture_output=True,
                text=True,
                timeout=30,
                stdin=subprocess.DEVNULL,
                cwd=parts[3],
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return str(exc)
        finally:
            shutil.rmtree(parts[2], ignore_errors=True)
        if cp.returncode == 0:
            return None
        return (cp.stderr.strip().splitlines() or [f"exit {cp.returncode}"])[-1]


@functools.cache
def _probe(place: Path) -> Mode:
    if not sys.platform.startswith("linux"):
        return Mode(False, f"overlay mounts need Linux, not {sys.platform}")
    if any(c in str(place) for c in _UNSAFE):
        return Mode(False, f"the layer store's path {place} holds a `,`, `:` or `\\`")
    for tool in ("unshare", "mount"):
        if shutil.which(tool) is None:
            return Mode(False, f"`{tool}` (util-linux) is not installed")
    place.mkdir(parents=True, exist_ok=True)
    last = ""
    for user_ns in (False, True) if os.geteuid() == 0 else (True,):
        why = _try(place, user_ns)
        if why is None:
            how = "in a user namespace" if user_ns else "as root"
            return Mode(True, f"an overlay per run, mounted {how}; {MODE_VAR}=on", user_ns)
        last = why
    return Mode(False, f"no overlay can be mounted in a mount namespace here: {last}")


def choose(store: Path) -> Mode:
    """The backend for the layer store at `store` ($FORGE_LAYERS, else what works)."""
    value = os.environ.get(MODE_VAR, "").strip().lower()
    if not value:
        return Mode(False, f"layers are opt-in: {MODE_VAR}=on", probed=False)
    if value in _OFF:
        return Mode(False, f"{MODE_VAR}={value}")
    if value and value not in _ON:
        raise ForgeError(f"{MODE_VAR}={value!r}: give on or off")
    return _probe(store)  # where no overlay mounts: checkouts, and why
