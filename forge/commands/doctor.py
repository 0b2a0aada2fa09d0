"""`forge doctor`: what a sandbox holds on this machine, found by making one (the
capabilities a command inside keeps, the namespaces it gets, what is hidden), what
a command runs in without it (a box, forge/base/box.py, where a namespace can be
made), how verification checkouts are made (layers or checkouts, and why), and what
forge falls back to where something is missing."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TypedDict

from forge.base import box, sandbox, seal
from forge.base.netns import pasta


class Facts(TypedDict):
    """What `forge doctor --json` prints, and its text is read from."""

    root: bool
    bwrap: str | None
    sandbox: bool
    refused: str | None
    capabilities: dict[str, str]
    capabilities_kept: dict[str, str]
    namespaces: dict[str, bool]
    hidden: list[str]
    dropped_variables: list[str]
    cgroup: str | None
    box: str | None  # None: commands outside the sandbox run in a box; else why not
    fallbacks: list[str]
    mode: str
    covered: list[str]
    reach: dict[str, str]
    limits: list[str]
    checkouts: str


def _checkouts() -> str:
    """How verification checkouts are made here (in the repository's layer store,
    else in a temp folder), and why."""
    import tempfile

    from forge.errors import ForgeError
    from forge.git.repo import discover
    from forge.layers import mode
    from forge.layers.store import store_dir

    try:
        place = store_dir(discover(Path.cwd()))
    except ForgeError:
        place = Path(tempfile.gettempdir())
    try:
        return mode.choose(place).line()
    except ForgeError as exc:
        return f"verification checkouts: refused: {exc}"


LAYER_LIMIT = (
    "a lane without the sandbox runs as you: it could write the layer store "
    "(<git dir>/forge/layers), which later verifications read"
)


def facts() -> Facts:
    """What `forge doctor --json` prints."""
    found = sandbox.probe()
    usable = sandbox.unavailable() is None
    named = sandbox.named_sockets(dict(os.environ))
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    hidden = [str(seal.key_dir()), ".git/forge/private", "/run", *([runtime] if runtime else [])]
    hidden += [str(p.parent) for paths in named.values() for p in paths if not p.is_dir()]
    facts_: Facts = {
        "root": os.geteuid() == 0,
        "bwrap": found.bwrap,
        "sandbox": usable,
        "refused": sandbox.unavailable(),
        "capabilities": dict(found.caps),
        "capabilities_kept": dict(found.kept),
        "namespaces": {
            "user": found.user_ns,
            "pid": usable,
            "ipc": usable,
            "uts": usable,
            "net": usable,
        },
        "hidden": list(dict.fromkeys(hidden)),
        "dropped_variables": sorted(named),
        "cgroup": str(box.delegated() or "") or None,
        "box": box.unavailable(),
        "fallbacks": fallbacks(usable, found),
        "mode": _mode(usable),
        "covered": [str(p) for p in sandbox.secrets(Path.home())],
        "reach": reach(usable),
        "limits": limits(usable),
        "checkouts": _checkouts(),
    }
    if "verification checkouts: layers" in facts_["checkouts"]:
        facts_["limits"].append(LAYER_LIMIT)
    return facts_


def reach(usable: bool) -> dict[str, str]:
    """What each role's commands reach over the network in the sandbox (all of the
    host's network without it)."""
    if not usable:
        return {role: "the host's network, as you" for role in ROLES}
    own = pasta.unavailable()
    keeps = (
        "the internet, in a network of its own (pasta): of the host only the plan's "
        "`host_ports` on 127.0.0.1, none of its abstract unix sockets"
        if own is None
        else "the host's network namespace: the internet, every port on the host's "
        f"loopback and its abstract unix sockets ({own})"
    )
    without = "nothing unless it says `network = true`; then " + keeps
    return {"agent": keeps, "setup": keeps, "check": without, "lane": without}


ROLES = ("agent", "setup", "check", "lane")


# What the sandbox does not hold, said where it runs (docs/security.md, "Limits").
LIMITS = [
    "an agent keeps the host's network namespace (no pasta here): it reaches services on "
    "the host's loopback and the host's abstract unix sockets (checks and lanes do not)",
    "an agent writes its own state folders (~/.claude, ~/.codex, ~/.cache, ...), which "
    "the person's CLI reads the next time it starts",
    "a command's own network reaches what the host reaches beyond its loopback: the "
    "host's other addresses (a container bridge's), private ranges, 169.254.0.0/16; "
    "forge sets no rules refusing them",
]
BOXED = (
    "without the sandbox a task runs as you, in a box that hides forge's key and history "
    "but not the rest of forge's state (.git/forge)"
)
AS_ROOT = "; as root it keeps every capability, and could undo the box's mounts"
UNBOXED = (
    "without the sandbox a task runs as you and, with no namespace here, reads and writes "
    "forge's key and history ("
)


def limits(usable: bool) -> list[str]:
    """What the sandbox (where it runs) and a run without it do not hold here."""
    why = box.unavailable()
    if why is not None:
        outside = UNBOXED + why + ")"
    else:
        outside = BOXED + (AS_ROOT if os.geteuid() == 0 else "")
    if not usable:
        return [outside]
    own = pasta.unavailable() is None  # a network of its own for what keeps one
    return [LIMITS[2] if own else LIMITS[0], outside, LIMITS[1]]


def _mode(usable: bool) -> str:
    """What a run does when neither its command nor its plan says."""
    if not usable:
        return f"off by default: {sandbox.unavailable()}; commands run as you"
    chosen = os.environ.get(sandbox.MODE_VAR)
    if chosen:
        return f"as {sandbox.MODE_VAR}={chosen} says, unless a plan or --sandbox says"
    return "on by default (a plan's `sandbox = false` or --no-sandbox turns it off)"


def fallbacks(usable: bool, found: sandbox.Probe) -> list[str]:
    out = []
    if found.bwrap is None:
        out.append(f"no bubblewrap: `sandbox = true` is refused ({sandbox.HOW_TO_GET})")
    elif not usable:
        out.append("`sandbox = true` is refused: " + (sandbox.unavailable() or ""))
    elif not found.user_ns:
        out.append(
            "no user namespace: capabilities are dropped by --cap-drop ALL alone "
            "(checked: none is kept)"
        )
    if usable and (why := pasta.unavailable()) is not None:
        out.append(f"an agent keeps the host's network: {why}")
    why = box.unavailable()
    if why is not None and box.delegated() is None:
        out.append(
            "no box and no delegated cgroup: without the sandbox, processes a command "
            "leaves are found by process group, forge's tag and working folder, forge "
            f"being their child subreaper ({why}; {box.why_not()})"
        )
    elif why is not None:
        out.append(f"no box: without the sandbox, a command's cgroup holds what it leaves ({why})")
    return out


BOX = (
    "a box (pid and mount namespaces of the command's own: nothing it starts outlives it; "
    "forge's key and history hidden)"
)


def render(data: Facts) -> str:
    yes = {True: "yes", False: "no"}
    lines = [
        f"running as root: {yes[data['root']]}",
        f"bubblewrap: {data['bwrap'] or 'not installed'}",
        f"sandbox: {'usable' if data['sandbox'] else 'refused: ' + str(data['refused'])}",
        f"sandbox mode: {data['mode']}",
    ]
    if data["capabilities"]:
        kept = data["capabilities_kept"]
        held = ", ".join(f"{k}={v}" for k, v in kept.items()) if kept else "none"
        lines.append(f"capabilities inside the sandbox: {held}")
        spaces = ", ".join(f"{k} {yes[v]}" for k, v in data["namespaces"].items())
        lines.append(f"namespaces: {spaces}")
        lines.append("read-only: / (all but the worktree, /tmp and agent state), /proc/sys")
        lines.append("hidden: " + ", ".join(data["hidden"]))
        if data["dropped_variables"]:
            lines.append("variables dropped: " + ", ".join(data["dropped_variables"]))
        if data["covered"]:
            lines.append("credentials covered: " + ", ".join(data["covered"]))
    lines += [f"network of {role}: {what}" for role, what in data["reach"].items()]
    lines.append(f"cgroup for commands: {data['cgroup'] or 'none'}")
    lines.append(f"without the sandbox: {BOX if data['box'] is None else 'no box: ' + data['box']}")
    lines.append(data["checkouts"])
    lines += [f"fallback: {line}" for line in data["fallbacks"]]
    lines += [f"limit: {line}" for line in data["limits"]]
    return "".join(f"{line}\n" for line in lines)
