"""The git hooks: install, uninstall, and what each hook does when git runs it.

The scripts (the project's `hooks/` folder, package `forge.hookscripts`) are thin:
they exec forge with the interpreter recorded at install time, so they work outside
the virtual environment. A hook that was already there is kept beside forge's as
`<name>.forge-legacy`, runs first with the same arguments and stdin, and its
failure is forge's failure; `uninstall` puts it back.

The pre-push fast path (a remembered verdict) must stay cheap: nothing here imports
the DAG, GitPython or the verification engine until a verification must run.
"""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

from forge.base import proc, procgroup
from forge.errors import ForgeError
from forge.frozen import frozen
from forge.git.repo import ZERO, Repository, discover, short_sha
from forge.plan.repo_config import VerifyConfig, load_repo_config
from forge.verify import records as verify_records
from forge.verify.records import Verdict, VerifyRecord

HOOKS = ("post-commit", "post-merge", "pre-push")
MARKER = "# forge-hook:"
LEGACY_SUFFIX = ".forge-legacy"
PUSH_KEY = "push"  # the checkouts of verifications run by pre-push
SKIP_VAR = "FORGE_SKIP_VERIFY"
UNVERIFIED_SAID = "hooks-unverified"  # a commit said once that nothing verifies it
ADD_VERIFY = (
    'add to forge.toml: [verify] with command = "pytest -q" (your test command), and '
    "setup and env as in a plan when it needs an environment"
)
TASK_VARS = ("FORGE_TASK", procgroup.TAG_VAR)  # set for the processes forge runs for a task


def _hooks_path(repo: Repository) -> str | None:
    """core.hooksPath, when set."""
    cp = repo.try_git("config", "--get", "core.hooksPath")
    value = cp.stdout.strip()
    return value if cp.returncode == 0 and value else None


def hooks_dir(repo: Repository) -> Path:
    """Where git looks: core.hooksPath when set, else <git common dir>/hooks."""
    value = _hooks_path(repo)
    if value is not None:
        path = Path(value).expanduser()
        # git runs hooks from the top of the worktree: a relative path starts there.
        return path if path.is_absolute() else repo.root / path
    return repo.common_dir / "hooks"


def _template(name: str) -> str:
    from importlib.resources import files

    return files("forge.hookscripts").joinpath(name).read_text(encoding="utf-8")


def is_forge_hook(path: Path) -> bool:
    try:
        with path.open("rb") as fh:
            return MARKER.encode() in fh.read(512)
    except OSError:
        return False


def _present(path: Path) -> bool:
    return path.exists() or path.is_symlink()


def install(repo: Repository, *, python: str | None = None) -> list[str]:
    """Install the hooks; returns what was done, one line each. Checks every hook
    before touching any, so a refusal leaves all of them as they were."""
    where = hooks_dir(repo)
    managed = _hooks_path(repo)
    interpreter = shlex.quote(python or sys.executable)
    try:
        return _install(where, managed, interpreter)
    except OSError as exc:
        if managed is not None:
            raise ForgeError(
                f"hooks are disabled by core.hooksPath={managed} ({where} is not a folder "
                f"forge can write: {exc.strerror or exc}); unset it or point it at a folder, "
                f"then run `forge hooks install` again"
            ) from exc
        raise ForgeError(f"cannot install the hooks in {where}: {exc}") from exc


def _install(where: Path, managed: str | None, interpreter: str) -> list[str]:
    if managed is not None:
        if _present(where) and not where.is_dir():
            raise NotADirectoryError(20, "not a folder", str(where))
        # A hook manager (husky, lefthook, ...) owns this folder and often tells
        # its hooks apart by file name: renaming one to <name>.forge-legacy would
        # silently switch it off. Its own hook must call forge instead.
        theirs = [n for n in HOOKS if _present(where / n) and not is_forge_hook(where / n)]
        if theirs:
            line = f'{interpreter} -P -m forge.hooks {theirs[0]} "$0" "$@"'
            more = f" (and likewise in {', '.join(theirs[1:])})" if theirs[1:] else ""
            raise ForgeError(
                f"core.hooksPath={managed} has its own {theirs[0]} hook, which forge will not "
                f"replace: add this line to your hook manager's {theirs[0]} hook "
                f"instead{more}: {line}"
            )
    for name in HOOKS:
        target, legacy = where / name, where / f"{name}{LEGACY_SUFFIX}"
        if _present(target) and not is_forge_hook(target) and _present(legacy):
            raise ForgeError(
                f"{target} is not forge's hook and {legacy.name} already exists beside it; "
                f"move one of them away, then run `forge hooks install` again"
            )
    where.mkdir(parents=True, exist_ok=True)
    done = []
    for name in HOOKS:
        target, legacy = where / name, where / f"{name}{LEGACY_SUFFIX}"
        text = _template(name).replace("@PYTHON@", interpreter)
        if is_forge_hook(target):
            done.append(f"updated {target}")
        elif _present(target):
            os.replace(target, legacy)
            done.append(f"installed {target} (your hook kept as {legacy.name}; it runs first)")
        else:
            done.append(f"installed {target}")
        tmp = target.with_name(f".{name}.forge-tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.chmod(0o755)
        os.replace(tmp, target)
    return done


def uninstall(repo: Repository) -> list[str]:
    """Remove forge's hooks and put back the ones they replaced."""
    where = hooks_dir(repo)
    done = []
    for name in HOOKS:
        target, legacy = where / name, where / f"{name}{LEGACY_SUFFIX}"
        if _present(target) and not is_forge_hook(target):
            extra = f"; {legacy.name} left as it is" if _present(legacy) else ""
            done.append(f"left {target}: it is not forge's hook{extra}")
            continue
        removed = _present(target)
        if removed:
            target.unlink()
        if _present(legacy):
            os.replace(legacy, target)
            done.append(f"restored your {name} hook")
        elif removed:
            done.append(f"removed {target}")
    return done or [f"no forge hooks in {where}: nothing to remove"]


# --- running a hook -----------------------------------------------------------------


def _say(message: str) -> None:
    from forge.base.text import printable

    sys.stderr.write(printable(f"forge: {message}\n"))
    sys.stderr.flush()


def _chain(name: str, script: Path, args: list[str], stdin: bytes | None) -> int:
    legacy = script.with_name(f"{name}{LEGACY_SUFFIX}")
    if not legacy.is_file() or not os.access(legacy, os.X_OK):
        return 0  # git ignores a hook that is not executable; so do we
    return proc.passthrough([str(legacy), *args], cwd=Path.cwd().resolve(), input=stdin)


def run_hook(name: str, args: list[str]) -> int:
    """What `<hook> ARGS` does; args[0] is the hook script's own path."""
    if name == "background":
        return _background(args[0])
    script, rest = Path(args[0]), args[1:]
    stdin = sys.stdin.buffer.read() if name == "pre-push" else None
    code = _chain(name, script, rest, stdin)
    if name == "pre-push":
        return code or _pre_push(stdin or b"")
    if name in ("post-commit", "post-merge"):
        if not _in_task_env():
            _after_commit()
        return code
    raise ForgeError(f"unknown hook '{name}'")


def unverified_warning(repo: Repository) -> list[str]:
    """What `forge hooks install` warns of: hooks that would verify nothing."""
    try:
        if _config(repo) is not None:
            return []
    except ForgeError as exc:
        return [f"the hooks cannot read forge.toml: {exc.message.splitlines()[0]}"]
    return [f"no [verify] in forge.toml, so each commit verifies nothing: {ADD_VERIFY}"]


def _config(repo: Repository) -> VerifyConfig | None:
    config = load_repo_config(repo.root, read_agents=False).verify
    return config if config is not None and config.lanes else None


def _in_task_env() -> bool:
    """Whether forge itself runs this (an agent or a task script committing in its
    worktree): those commits are not the user's and must not stop, or replace,
    the verification of the user's own."""
    return any(os.environ.get(var) for var in TASK_VARS)


def _in_task_worktree(repo: Repository) -> bool:
    return repo.root.resolve().is_relative_to(repo.worktrees_root().resolve())


def _after_commit() -> None:
    from forge.verify import background as verify_bg

    repo = discover(Path.cwd())
    if _in_task_worktree(repo):
        return
    config = _config(repo)
    said = repo.state.root / UNVERIFIED_SAID
    if config is None:
        if not said.exists():  # once: a reminder on every commit is noise
            said.parent.mkdir(parents=True, exist_ok=True)
            said.touch()
            _say(f"no verification configured, so this commit is not verified: {ADD_VERIFY}")
        return
    said.unlink(missing_ok=True)  # said again should [verify] go away
    commit = repo.rev_parse("HEAD")
    if verify_records.cached(repo.state, repo.tree_of(commit), config.fingerprint(), failed=True):
        return  # this tree was judged already
    verify_bg.start(repo, commit)
    _say(f"verifying {short_sha(commit)} in the background (log {verify_bg.log_file(repo)})")


def _background(commit: str) -> int:
    from forge.base import interrupt
    from forge.verify import background as verify_bg

    repo = discover(Path.cwd())
    config = _config(repo)
    if config is None:
        return 0
    with interrupt.on_stop_signals() as stop:
        verify_bg.run(repo, commit, config, stop=stop)
    return 0


@frozen
class _Tip:
    ref: str
    commit: str
    old: str = ZERO  # the remote's tip before the push (ZERO: a new ref)


def _tips(stdin: bytes) -> list[_Tip]:
    """`<local ref> <local sha> <remote ref> <remote sha>` per line; deletions push
    no commit and need no verification."""
    tips: dict[str, _Tip] = {}
    for line in stdin.decode(errors="replace").splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[1] != ZERO:
            tips.setdefault(parts[1], _Tip(parts[0], parts[1], parts[3]))
    return list(tips.values())


def _pre_push(stdin: bytes) -> int:
    if os.environ.get(SKIP_VAR) == "1":
        _say(f"{SKIP_VAR}=1: pushing without verification")
        return 0
    repo = discover(Path.cwd())
    config = _config(repo)
    if config is None:
        _say("no verification configured ([verify] in forge.toml): UNVERIFIED, push allowed")
        return 0
    fp = config.fingerprint()
    for tip in _tips(stdin):
        short = f"{tip.ref} {short_sha(tip.commit)}"
        hit = verify_records.cached(repo.state, repo.tree_of(tip.commit), fp, failed=True)
        record = hit or _verdict_for(repo, tip.commit, config)
        if record is None:
            return 1
        how = " (remembered verdict)" if record.cached else ""
        if record.verdict in (Verdict.PASS, Verdict.FLAKY):
            _say(f"{short}: {record.summary}{how}")
            continue
        from forge.verify.engine import describe_failure

        on_old = _failing_on_old(repo, tip, config, record)
        if on_old is not None and all(f.test in on_old for f in record.failures):
            tests = ", ".join(f.test for f in record.failures[:10])
            _say(
                f"{short}: FAIL, but only in tests already failing on the remote's "
                f"{short_sha(tip.old)} ({tests}): push allowed"
            )
            continue
        _say(f"{short}: {record.summary}{how}: push blocked")
        _say(describe_failure(record))
        old = on_old or frozenset()
        for failure in sorted(record.failures, key=lambda f: f.test in old)[:10]:
            # each failing test with its first error; new ones first
            also = f" (also failing on the remote's {short_sha(tip.old)})"
            _say(
                f"  failed{also if failure.test in old else ' (new)' if on_old is not None else ''}: "
                f"{failure.describe()}"
            )
        _say(f"(set {SKIP_VAR}=1 to push anyway)")
        return 1
    return 0


def _failing_on_old(
    repo: Repository, tip: _Tip, config: VerifyConfig, record: VerifyRecord
) -> frozenset[str] | None:
    """`gate_on = "regressions"`: of the pushed tip's failing tests, those that fail on
    the remote's old tip too (run there now); a test the old tip does not have is new.
    None when that cannot be told (green gate, a new ref, tests not named or not
    runnable alone): every failure is then just a failure."""
    if record.verdict != Verdict.FAIL or tip.old == ZERO or config.gate_on == "green":
        return None
    if repo.try_git("cat-file", "-e", f"{tip.old}^{{commit}}").returncode != 0:
        return None
    from forge.base import interrupt
    from forge.run.gate.subsets import Where, failing_by_lane, run_subset
    from forge.verify.flakes import exists_at

    failing = failing_by_lane(config, record)
    if not failing:
        return None
    asked = {
        lane: frozenset(t for t in ids if exists_at(repo, tip.old, t))
        for lane, ids in failing.items()
    }
    asked = {lane: ids for lane, ids in asked.items() if ids}
    if not asked:
        return frozenset()  # none of them is there: all new
    with interrupt.on_stop_signals() as stop:
        where = Where(PUSH_KEY, stop, _say)
        judged = run_subset(repo, tip.old, config, asked, first=False, where=where)
    if judged is None:
        return None
    if judged.verdict != Verdict.FAIL:
        return frozenset()
    on_old = failing_by_lane(config, judged) or {}
    return frozenset(t for lane, ids in asked.items() for t in ids & on_old.get(lane, frozenset()))


def _verdict_for(repo: Repository, commit: str, config: VerifyConfig) -> VerifyRecord | None:
    """Wait for a background verification of this commit, or run one now."""
    from forge.base import interrupt
    from forge.verify import background as verify_bg
    from forge.verify.engine import Ask, verify_commit

    current = verify_bg.running(repo)
    if current is not None and current.commit == commit:
        _say(f"waiting for the background verification of {short_sha(commit)}")
        verify_bg.wait_gone(current.owner, timeout=float("inf"))
        done = verify_bg.result_for(repo, commit)
        if done is not None and done.verdict in (Verdict.PASS, Verdict.FLAKY, Verdict.FAIL):
            return done
    _say(f"verifying {short_sha(commit)} before the push")
    with interrupt.on_stop_signals() as stop:
        record = verify_commit(
            repo,
            commit,
            config,
            key=PUSH_KEY,
            stop=stop,
            ask=Ask(on_event=_say, remembered_fail=True),
        )
    if stop.is_set():
        _say("verification interrupted: push blocked")
        return None
    return record


def main(argv: list[str]) -> int:
    """`python -m forge.hooks NAME SCRIPT [ARGS...]`: what the hook scripts exec. It
    skips the CLI (typer's import alone costs more than a remembered verdict)."""
    from forge.errors import ExitCode

    if not argv:
        sys.stderr.write("usage: python -m forge.hooks NAME SCRIPT [ARGS...]\n")
        return int(ExitCode.USAGE)
    try:
        return run_hook(argv[0], argv[1:])
    except ForgeError as exc:
        for line in exc.message.splitlines():
            _say(line)
        return int(exc.code)
