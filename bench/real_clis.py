"""The real agent CLIs through forge, against the scripted model server: a check
by hand (CI has no CLI).

    python bench/real_clis.py [--cli claude,codex] [--bin DIR ...] [--keep DIR] [--record DIR]
                              [--host-ports] [--claude-sandbox]

For each of claude, codex, gemini and aider found on PATH (or in a `--bin`
folder), it makes a throwaway git repository, a one-task plan whose agent is that
CLI's preset pointed at `bench/model_server.py` (started on a free port of
127.0.0.1, in `ok` mode) and a verification `test -f x.txt`, and runs `forge plan`
and `forge run` in forge's default mode (the sandbox on where it holds). It
prints one line per CLI: landed, or how the task ended and why. Run it as root
and as a user (`runuser -u USER -- python bench/real_clis.py`); the user needs
the CLIs where it can read them.

What each CLI needs to reach the server (set in the plan's `[agents.NAME]`):
Claude Code `ANTHROPIC_BASE_URL`; Codex a model provider given with `-c`; Gemini
CLI `GOOGLE_GEMINI_BASE_URL` and a settings file choosing its API-key login
(with a base URL alone it picks the "gateway" login and exits 41), in the
folder forge's `GEMINI_CLI_HOME` names; aider an OpenAI-compatible model
(`openai/bench`, `OPENAI_API_BASE`). `--record DIR` copies each agent's log to
DIR/CLI-ROLE.log (ROLE: root or user), the fixtures of tests/fixtures/agents.
`--host-ports` names the server's port in the plan's `[sandbox] host_ports`, for
a forge whose agents have a network namespace of their own. `--claude-sandbox`
turns Claude Code's own sandbox on in its settings (it needs bubblewrap and
socat) and starts the server in `bash` mode, so that its turn is a Bash call
that sandbox wraps.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

from forge.agents.presets import PRESET_TABLES
from forge.run.state.store import read_state

BENCH = Path(__file__).resolve().parent
CLIS = ("claude", "codex", "gemini", "aider")
KEY = "forge-bench-key"  # a dummy key: the server takes any
PROMPT = "Create the file x.txt in the working directory, holding the word `written`."
GEMINI_SETTINGS = {"security": {"auth": {"selectedType": "gemini-api-key"}}}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _serve(port: int, mode: str) -> subprocess.Popen[bytes]:
    """The model server, once it listens."""
    server = subprocess.Popen(
        [sys.executable, str(BENCH / "model_server.py"), str(port), mode],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            return server
        except OSError:
            if server.poll() is not None:
                break
            _pause(server)
    server.kill()
    raise SystemExit(f"model server did not start on port {port}")


def _pause(server: subprocess.Popen[bytes]) -> None:
    """Wait a little for the server (it exits only if it failed)."""
    with contextlib.suppress(subprocess.TimeoutExpired):
        server.wait(timeout=0.05)


def _argv(table: dict[str, object], key: str) -> list[str]:
    value = table.get(key)
    return [str(a) for a in value] if isinstance(value, list) else []


def agent_table(cli: str, exe: str, port: int) -> dict[str, object]:
    """The plan's `[agents.CLI]` table: the preset's commands run from `exe`,
    pointed at the server on `port`."""
    preset = PRESET_TABLES[cli]
    keys = ("command", "sandbox_command", "root_sandbox_command")
    commands = {k: _argv(preset, k) for k in keys}
    commands = {k: [exe, *argv[1:]] for k, argv in commands.items() if argv}
    preset_env = preset.get("env")
    env = {str(k): str(v) for k, v in preset_env.items()} if isinstance(preset_env, dict) else {}
    url = f"http://127.0.0.1:{port}"
    table: dict[str, object] = {}
    if cli == "claude":
        env.update(ANTHROPIC_BASE_URL=url, ANTHROPIC_API_KEY=KEY)
    elif cli == "codex":
        provider = (
            f'{{name="bench", base_url="{url}/v1", wire_api="responses", env_key="CODEX_API_KEY"}}'
        )
        extra = ["-c", 'model_provider="bench"', "-c", f"model_providers.bench={provider}"]
        # The prompt's `-` stays last.
        commands = {k: [*argv[:-1], *extra, argv[-1]] for k, argv in commands.items()}
        env.update(CODEX_API_KEY=KEY)
    elif cli == "gemini":
        env.update(GEMINI_API_KEY=KEY, GOOGLE_GEMINI_BASE_URL=url)
    elif cli == "aider":
        env.update(OPENAI_API_BASE=f"{url}/v1", OPENAI_API_KEY=KEY)
        table.update(models=["openai/bench"], default_model="openai/bench")
    return {**table, **commands, "env": env}


def write_repo(where: Path) -> Path:
    """A git repository of one commit."""
    repo = where / "repo"
    repo.mkdir(parents=True)
    (repo / "README.md").write_text("A throwaway repository of bench/real_clis.py.\n")
    env = {**os.environ, "GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@localhost"}
    env.update(GIT_COMMITTER_NAME="bench", GIT_COMMITTER_EMAIL="bench@localhost")
    for args in (["init", "-q", "-b", "main"], ["add", "."], ["commit", "-qm", "start"]):
        subprocess.run(["git", *args], cwd=repo, env=env, check=True)
    return repo


def _toml(value: object) -> str:
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{json.dumps(k)} = {_toml(v)}" for k, v in value.items()) + " }"
    return json.dumps(value)


def write_plan(where: Path, cli: str, table: dict[str, object], ports: list[int]) -> Path:
    lines = [f'name = "{cli}"', f'agent = "{cli}"', 'verify = "test -f x.txt"', f"[agents.{cli}]"]
    lines += [f"{key} = {_toml(value)}" for key, value in table.items()]
    if ports:  # the host's ports an agent in a network namespace of its own reaches
        lines += ["[sandbox]", f"host_ports = {ports}"]
    lines += ["[[task]]", 'id = "x"', f"prompt = {json.dumps(PROMPT)}", 'files = ["x.txt"]']
    plan = where / f"{cli}.toml"
    plan.write_text("\n".join(lines) + "\n")
    return plan


def _homes(where: Path, claude_sandbox: bool) -> dict[str, str]:
    """The CLIs' settings, in the folders forge links each task's CLI home to
    (forge.agents.config_home): Gemini CLI's login choice, and Claude Code's own
    sandbox turned on when asked."""
    gemini, claude = where / "gemini-home", where / "claude-home"
    (gemini / ".gemini").mkdir(parents=True, exist_ok=True)
    (gemini / ".gemini" / "settings.json").write_text(json.dumps(GEMINI_SETTINGS))
    # forge's own state (its key, each task's agent state) goes with the rest.
    homes = {"GEMINI_CLI_HOME": str(gemini), "XDG_STATE_HOME": str(where / "state")}
    if claude_sandbox:
        claude.mkdir(parents=True, exist_ok=True)
        (claude / "settings.json").write_text(json.dumps({"sandbox": {"enabled": True}}))
        homes["CLAUDE_CONFIG_DIR"] = str(claude)
    return homes


def _forge(repo: Path, homes: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "forge", *args],
        cwd=repo,
        env={**os.environ, **homes},
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=600,
    )


def _version(exe: str) -> str:
    try:
        cp = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"? ({exc})"
    lines = (cp.stdout.strip() or cp.stderr.strip()).splitlines()
    return lines[-1] if lines else "?"


def check(cli: str, exe: str, port: int, where: Path, args: argparse.Namespace) -> str:
    """Run the one-task plan of `cli`; one line: landed, or what went wrong."""
    where.mkdir(parents=True)
    repo = write_repo(where)
    plan = write_plan(where, cli, agent_table(cli, exe, port), [port] if args.host_ports else [])
    homes = _homes(where.parent, args.claude_sandbox)
    cp = _forge(repo, homes, "plan", str(plan))
    if cp.returncode != 0:
        return f"forge plan failed: {(cp.stderr or cp.stdout).strip()}"
    run = _forge(repo, homes, "run", cli)
    said = [ln for ln in (run.stdout + run.stderr).splitlines() if ln.startswith(("sandbox", "["))]
    mode = next((ln.split("] ", 1)[-1] for ln in said if "sandbox:" in ln), "sandbox: ?")
    state = repo / ".git" / "forge" / "plans" / cli / "state.json"
    if not state.is_file():
        return f"forge run exited {run.returncode}: {(run.stderr or run.stdout).strip()}"
    task = read_state(state)["tasks"]["x"]
    logs = sorted((repo / ".git" / "forge" / "plans" / cli / "logs" / "x").glob("attempt-*"))
    if args.record is not None and logs:
        role = "root" if os.geteuid() == 0 else "user"
        args.record.mkdir(parents=True, exist_ok=True)
        shutil.copy(logs[-1] / "agent.log", args.record / f"{cli}-{role}.log")
    cost = next((ln for ln in run.stdout.splitlines() if ln.startswith("cost:")), "cost: ?")
    head = f"exit {run.returncode}, {mode.split(' (')[0].strip()}, {cost}"
    if task["status"] == "MERGED":
        return f"landed ({head})"
    last = (logs[-1] / "agent.log").read_text(errors="replace")[-300:] if logs else ""
    return f"{task['status']}: {task.get('reason')} ({head}); log ends: {last!r}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--cli", default=",".join(CLIS), help="which CLIs (comma-separated)")
    ap.add_argument("--bin", action="append", default=[], help="a folder holding CLIs")
    ap.add_argument("--keep", type=Path, help="work in this folder and keep it")
    ap.add_argument("--record", type=Path, help="copy each agent's log into this folder")
    ap.add_argument(
        "--host-ports", action="store_true", help="name the server's port in `[sandbox] host_ports`"
    )
    ap.add_argument(
        "--claude-sandbox",
        action="store_true",
        help="turn Claude Code's own sandbox on (it needs socat); its turn is a Bash call",
    )
    args = ap.parse_args(argv)
    path = os.pathsep.join([*args.bin, os.environ.get("PATH", "")])
    # Not under /tmp: the sandbox's /tmp is its own, and the links forge makes
    # into each task's CLI home must lead somewhere it sees.
    where = args.keep or Path(tempfile.mkdtemp(prefix="forge-real-clis-", dir=Path.home()))
    port = _free_port()
    server = _serve(port, "bash" if args.claude_sandbox else "ok")
    who = "root" if os.geteuid() == 0 else f"uid {os.geteuid()}"
    print(f"as {who}, model server on 127.0.0.1:{port}, work in {where}")
    failed = 0
    try:
        for cli in args.cli.split(","):
            exe = shutil.which(cli, path=path)
            if exe is None:
                print(f"{cli}: not installed (not on PATH nor in --bin)")
                continue
            line = check(cli, exe, port, where / cli, args)
            failed += not line.startswith("landed")
            print(f"{cli} {_version(exe)}: {line}", flush=True)
    finally:
        server.terminate()
        server.wait()
        if args.keep is None:
            shutil.rmtree(where, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
