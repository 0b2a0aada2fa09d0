"""File containment (the default where it holds, see `choose`; `sandbox = false` in a
plan or `forge run --no-sandbox` turns it off):
a command runs under bubblewrap with the whole file system read-only except its
worktree (or verification checkout), a temp folder of its own at /tmp (TMPDIR
points there), and, for a task's commands, the agent CLIs' state folders and
forge's per-plan agent state. It holds no capability (`--cap-drop ALL`, in a user
namespace where one can be made: as root too), and has its own pid, IPC and UTS
namespaces; `/proc/sys` is read-only. forge's key (forge/base/seal.py) is hidden,
and so are the user's sockets: a tmpfs over /run, $XDG_RUNTIME_DIR and the folders
of the sockets the environment names, whose variables are dropped (the plan's
`sockets = [...]` passes one). bwrap starts with the command's final environment
(it is pid 1 inside, and its /proc/1/environ is readable there), the person's
credential files are covered and git's global config is a copy without credential
helpers (`secrets`, `git_configs`). A verification lane or a task's check has no
network unless it says `network = true`; an agent keeps it (it needs its API), in a
network namespace of its own where pasta can make one (forge/base/netns/pasta.py):
the internet, and of the host only the loopback ports the plan names.
The process group is shared (`--new-session` would take the command out of it);
bubblewrap's end KILLs its pid namespace, so forge sends TERM to the processes
inside, not to bwrap (forge/base/procgroup.py), and their handlers get the grace.
A pid inside (`$$`) is the namespace's, not the machine's. forge checks at start that a command inside
holds no capability (`check`), and refuses a sandbox that keeps one.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import shutil
import stat
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from forge.base import seal
from forge.base.netns import pasta
from forge.errors import ForgeError
from forge.frozen import frozen

HOW_TO_GET = (
    "install bubblewrap (`apt-get install bubblewrap`, `dnf install bubblewrap`) "
    "or run without the sandbox"
)
# Where agent CLIs keep their login, settings and session state: they must write there.
# Not ~/.config as a whole: git's own global config lives there.
AGENT_STATE = (
    ".claude",
    ".claude.json",
    ".codex",
    ".gemini",
    ".aider",
    ".config/claude",
    ".config/gemini",
    ".config/codex",
    ".cache",
    ".npm",
)
# Variables that name a service a command could drive (an agent, a bus, a display,
# a terminal multiplexer, a container engine): dropped, their sockets hidden.
SOCKET_VARS = (
    "SSH_AUTH_SOCK",
    "DBUS_SESSION_BUS_ADDRESS",
    "DBUS_SYSTEM_BUS_ADDRESS",
    "XDG_RUNTIME_DIR",
    "GPG_AGENT_INFO",
    "DOCKER_HOST",
    "CONTAINER_HOST",
    "WAYLAND_DISPLAY",
    "DISPLAY",
    "PULSE_SERVER",
    "TMUX",
    "STY",
    "SWAYSOCK",
    "I3SOCK",
    "NVIM",
    "NVIM_LISTEN_ADDRESS",
    "KITTY_LISTEN_ON",
    "VSCODE_IPC_HOOK_CLI",
)
_PATHS_IN = re.compile(r"/[^,;:=\s]+")
_VAR_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Old /proc entries a process with uid 0 may write without any capability (the
# host's sysctls, sysrq): read-only inside. bwrap covers some, not /proc/sys.
_PROC_COVER = ("/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus")
_CAPS = ("CapInh", "CapPrm", "CapEff", "CapAmb")
# The processes of the sandbox itself (bubblewrap, and pasta around it): a
# command's signals go past them, and their ends are no command's leftovers.
WRAPPERS = ("bwrap", *pasta.COMMS)


def _flags(user_ns: bool, network: bool = True) -> list[str]:
    """bwrap's options before the binds: the root read-only, the namespaces, no
    capability."""
    args = ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    for path in _PROC_COVER:
        args += ["--ro-bind-try", path, path]
    args += ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
    if user_ns:
        args.append("--unshare-user")
    if not network:
        args.append("--unshare-net")
    return [*args, "--cap-drop", "ALL", "--die-with-parent"]


@frozen
class Probe:
    """What a sandbox holds on this machine, found by running one."""

    bwrap: str | None  # its path; None: not installed
    user_ns: bool = False  # `--unshare-user` works here
    caps: tuple[tuple[str, str], ...] = ()  # the Cap* lines of a process inside
    error: str | None = None  # why no sandbox could be made

    @property
    def kept(self) -> tuple[tuple[str, str], ...]:
        """The capability sets a command inside still holds (empty: none)."""
        return tuple((k, v) for k, v in self.caps if k in _CAPS and int(v, 16) != 0)


def _status_inside(bwrap: str, user_ns: bool) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [bwrap, *_flags(user_ns, network=False), "--", "cat", "/proc/self/status"],
        capture_output=True,
        text=True,
        timeout=30,
        stdin=subprocess.DEVNULL,
        cwd="/",
    )


@functools.cache
def probe() -> Probe:
    """Run `cat /proc/self/status` in a sandbox (in a user namespace when one can be
    made) and read what the command holds."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return Probe(None)
    last = ""
    for user_ns in (True, False):
        try:
            cp = _status_inside(bwrap, user_ns)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return Probe(bwrap, error=f"bwrap cannot run here ({exc})")
        if cp.returncode == 0:
            caps = tuple(
                (key, value.strip())
                for key, _, value in (line.partition(":") for line in cp.stdout.splitlines())
                if key.startswith("Cap")
            )
            return Probe(bwrap, user_ns=user_ns, caps=caps)
        last = (cp.stderr.strip().splitlines() or ["no reason given"])[-1]
    return Probe(bwrap, error=f"bwrap cannot make a sandbox here (namespaces disabled?): {last}")


def unavailable() -> str | None:
    """Why the sandbox cannot run here (None: it can): no bwrap, no sandbox can be
    made, or a command inside would keep a capability."""
    found = probe()
    if found.bwrap is None:
        return f"the sandbox needs bubblewrap (bwrap), which is not installed: {HOW_TO_GET}"
    if found.error is not None:
        return found.error
    if found.kept:
        held = ", ".join(f"{k}={v}" for k, v in found.kept)
        return f"the sandbox keeps capabilities here ({held}); forge refuses to run in it"
    return None


def require() -> None:
    """A one-line refusal when the sandbox was asked for and cannot run."""
    why = unavailable()
    if why is not None:
        raise ForgeError(why)


MODE_VAR = "FORGE_SANDBOX"  # "on" or "off": what neither the command nor the plan said
_ON, _OFF = ("1", "on", "true", "yes"), ("0", "off", "false", "no")


@frozen
class Choice:
    """Whether commands run in the sandbox, and the line to say once about it (None:
    someone chose, nothing to say)."""

    on: bool
    said: str | None = None


def choose(asked: bool | None, plan: bool | None) -> Choice:
    """The sandbox mode of a run: the command's `--sandbox`/`--no-sandbox`, else the
    plan's `sandbox`, else $FORGE_SANDBOX, else on where the sandbox holds here. A
    sandbox chosen that cannot hold is refused (ForgeError, one line); by default,
    where it cannot hold, forge says so and goes on without it."""
    said = asked if asked is not None else plan
    if said is None:
        value = os.environ.get(MODE_VAR, "").strip().lower()
        if value in _ON + _OFF:
            said = value in _ON
        elif value:
            raise ForgeError(f"{MODE_VAR}={value!r}: give on or off")
    if said is not None:
        if said:
            require()
        return Choice(on=said)
    why = unavailable()
    if why is None:
        return Choice(
            on=True,
            said="sandbox: on (bubblewrap; `sandbox = false` or --no-sandbox turns it off)",
        )
    return Choice(on=False, said=f"sandbox: off: {why}; commands run as you")


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def named_sockets(env: Mapping[str, str]) -> dict[str, list[Path]]:
    """The variables of `env` that name a socket or a service's folder, with the
    existing sockets (or, for XDG_RUNTIME_DIR, the folder) each names."""
    out: dict[str, list[Path]] = {}
    for name, value in env.items():
        found = []
        for raw in _PATHS_IN.findall(value):
            path = Path(raw)
            try:
                mode = path.stat().st_mode
            except (OSError, ValueError):
                continue
            if stat.S_ISSOCK(mode) or (name == "XDG_RUNTIME_DIR" and stat.S_ISDIR(mode)):
                found.append(path)
        if found or name in SOCKET_VARS:
            out[name] = found
    return out


SETUP_CACHE = "setup-cache"  # under forge's state folder: a sandboxed setup's caches
# Where the usual tools keep their caches, under a sandbox's cache folder.
CACHE_VARS = (
    ("XDG_CACHE_HOME", ""),
    ("UV_CACHE_DIR", "uv"),
    ("npm_config_cache", "npm"),
    ("PIP_CACHE_DIR", "pip"),
    ("YARN_CACHE_FOLDER", "yarn"),
)


def _caches(folder: Path | None, env: Mapping[str, str]) -> dict[str, str]:
    """The cache variables the command's environment leaves unset, pointing into
    `folder` (none without one)."""
    if folder is None:
        return {}
    return {var: str(folder / sub) for var, sub in CACHE_VARS if var not in env}


def _shown(path: Path, bound: list[Path]) -> bool:
    """Whether the host's `path` is there inside: the private /tmp covers the host's."""
    return not _inside(path, Path("/tmp")) or any(_inside(path, b) for b in bound)


def _credentials(
    tmp: Path, env: Mapping[str, str], bound: list[Path]
) -> list[tuple[Path, list[str]]]:
    """The mounts that cover the person's credentials (an empty folder, an empty
    file) and show git's global configuration without its credential helpers."""
    home = Path.home()
    out: list[tuple[Path, list[str]]] = []
    for path in secrets(home):
        real = path.resolve()
        if not _shown(real, bound):
            continue
        cover = ["--tmpfs", str(real)] if real.is_dir() else ["--ro-bind", "/dev/null", str(real)]
        out.append((real, cover))
    copies = tmp / ".forge-home"  # seen read-only at /tmp/.forge-home too
    for i, path in enumerate(git_configs(home, env)):
        if _shown(path, bound):
            copy = without_helpers(path, copies / f"gitconfig-{i}")
            out.append((path, ["--ro-bind", str(copy), str(path)]))
    if out and copies.is_dir():
        out.append((Path("/tmp/.forge-home"), ["--ro-bind", str(copies), "/tmp/.forge-home"]))
    return out


@frozen
class Wrapped:
    """A command as bwrap runs it, and the whole environment to start bwrap with."""

    argv: list[str]
    env: dict[str, str]


@frozen
class Sandbox:
    """What one command may write, and what it must see read-only although it lies
    under the folder the private /tmp covers (the user's repository, in tests).
    `agents`: the agent CLIs' state folders are writable (a task's commands; never
    a verification lane). `network`: the command keeps the network. `sockets`: the
    sockets (paths, or variables naming them) the plan passes."""

    writable: tuple[Path, ...]
    readable: tuple[Path, ...] = ()
    agents: bool = True
    network: bool = True
    sockets: tuple[str, ...] = ()
    # A folder of forge's the command may write its caches into (a setup's `uv sync`,
    # `npm ci`, `pip install` with the home folder read-only): the usual variables
    # point there unless the command's environment sets them.
    cache: Path | None = None
    # The host's loopback TCP ports a command with the network reaches, in a network
    # of its own (forge/base/netns/pasta.py); nothing else of the host's.
    host_ports: tuple[int, ...] = ()
    private: tuple[Path, ...] = ()  # forge's folders hidden like its key (GroupSpec.hide)

    def wrap(
        self,
        argv: Sequence[str],
        *,
        tmp: Path,
        env: Mapping[str, str],
        stack: contextlib.ExitStack | None = None,
    ) -> Wrapped:
        """The bwrap command line running `argv` inside, its private /tmp the host
        folder `tmp`, and the environment bwrap itself must start with: `env` (the
        command's whole environment) without what the sandbox drops. bwrap is pid 1
        inside, and its `/proc/1/environ` is readable there: a variable dropped with
        `--unsetenv` would still be read from it. With `stack`, a command that keeps
        the network gets a network namespace of its own where pasta can make one,
        torn down when `stack` closes."""
        binds: list[tuple[Path, str]] = [(tmp, "bind")]
        hidden: list[Path] = []
        binds += [(p, "ro-bind") for p in self.readable if p.exists()]
        if self.agents:
            home = Path.home()
            binds += [(home / n, "bind") for n in AGENT_STATE if (home / n).exists()]
        binds += [(p, "bind") for p in self.writable if p.exists()]
        caches = _caches(self.cache, env)
        if self.cache is not None and caches:
            self.cache.mkdir(parents=True, exist_ok=True)
            binds.append((self.cache, "bind"))
        # /tmp itself is mounted at /tmp, not at the host folder's path.
        mounts: list[tuple[Path, list[str]]] = [(Path("/tmp"), ["--bind", str(tmp), "/tmp"])]
        mounts += [(p, [f"--{kind}", str(p), str(p)]) for p, kind in binds[1:]]
        keys = seal.key_dir()
        hidden += [p for p in (keys, *self.private) if p.is_dir()]
        unset, passed = self._sockets(env, [p for p, _ in binds[1:]], hidden, mounts)
        for folder in hidden:
            mounts.append((folder, ["--tmpfs", str(folder)]))
        mounts += _credentials(tmp, env, [p for p, _ in binds[1:]])
        mounts += [(p, ["--ro-bind", str(p), str(p)]) for p in passed]
        outer: list[str] = []
        args = ["bwrap", *_flags(probe().user_ns, self.network)]
        resolv = Path("/etc/resolv.conf").resolve()
        shown = resolv  # what the command reads as /etc/resolv.conf
        if self.network and stack is not None and pasta.unavailable() is None:
            outer = pasta.own_network(self.host_ports, stack)
            if os.geteuid() != 0 and probe().user_ns:  # pasta's namespace made it uid 0
                args += ["--uid", str(os.getuid()), "--gid", str(os.getgid())]
            shown = pasta.resolv_conf(tmp / ".forge-home") or resolv
        if (shown != resolv or any(_inside(resolv, f) for f in hidden)) and shown.exists():
            mounts.append((resolv, ["--ro-bind", str(shown), str(resolv)]))
        # A mount covers what was mounted below it before: the outer first, so a
        # writable folder never uncovers what a hidden or read-only one inside it hides.
        order = sorted(range(len(mounts)), key=lambda i: (len(mounts[i][0].parts), i))
        for i in order:
            args += mounts[i][1]
        final = {**caches, **{k: v for k, v in env.items() if k not in unset}}
        final["TMPDIR"] = "/tmp"
        return Wrapped([*outer, *args, "--", *argv], final)

    def _sockets(
        self,
        env: Mapping[str, str],
        bound: list[Path],
        hidden: list[Path],
        mounts: list[tuple[Path, list[str]]],
    ) -> tuple[list[str], list[Path]]:
        """Hide the sockets `env` names (into `hidden` and `mounts`); the variables
        to drop and the sockets the plan passes."""
        named = named_sockets(env)
        passed = [Path(s) for s in self.sockets if not _VAR_NAME.match(s)]
        passed += [p for s in self.sockets if s in named for p in named[s]]
        passed = [p for p in passed if p.exists()]
        unset = [
            name
            for name, paths in named.items()
            if name not in self.sockets and not (paths and all(p in passed for p in paths))
        ]
        home = Path.home()
        run = Path("/run")
        if run.is_dir():
            hidden.append(run)
        for paths in named.values():
            for path in paths:
                folder = path if path.is_dir() else path.parent
                broad = folder == Path("/") or _inside(home, folder)
                broad = broad or any(_inside(b, folder) or _inside(folder, b) for b in bound)
                if not broad:
                    hidden.append(folder)
                elif not path.is_dir() and path not in passed:
                    mounts.append((path, ["--ro-bind", "/dev/null", str(path)]))
        return unset, passed


# -- the person's credentials, out of the sandbox's sight -------------------------

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
    """git's global and system configuration files that exist (each as the file it
    really is: a bind covers the target, not a link to it)."""
    xdg = Path(env.get("XDG_CONFIG_HOME") or home / ".config")
    found = [xdg / "git" / "config", home / ".gitconfig"]
    if env.get("GIT_CONFIG_GLOBAL"):
        found.append(Path(env["GIT_CONFIG_GLOBAL"]).expanduser())
    if not env.get("GIT_CONFIG_NOSYSTEM"):
        found.append(Path(env.get("GIT_CONFIG_SYSTEM") or "/etc/gitconfig").expanduser())
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
