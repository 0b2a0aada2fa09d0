"""Recorded plans: what `forge plan` checked and wrote, and how other commands
find it again.

A recorded plan lives at `<common>/forge/plans/<name>/plan.json`, under the git
common directory, so every worktree of the repository sees it and the user's
working tree stays untouched. It holds the normalized plan, the source file's
path and hash, the pinned base commit and the waves.
"""

from __future__ import annotations

import contextlib
import hashlib
import tomllib
from collections.abc import Callable, Collection, Mapping
from dataclasses import field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from forge.base.files import SCHEMA_VERSION, JsonObject, plan_lock, write_json
from forge.errors import Busy, ForgeError, PlanError, StateError
from forge.frozen import frozen
from forge.git import refs
from forge.git.repo import Repository
from forge.plan.dag import Waves
from forge.plan.load import load_plan_source
from forge.plan.model import Plan, name_problem
from forge.plan.names import did_you_mean, looks_like_path, recorded_name

if TYPE_CHECKING:
    from filelock import FileLock


@frozen(kw_only=True)
class Recorded:
    plan: Plan
    source_path: Path | None
    source_sha256: str
    base_ref: str  # what the base was given as (`main`, or HEAD's branch)
    base_commit: str  # the commit it named when the plan was recorded
    waves: tuple[tuple[str, ...], ...]
    deferrals: Mapping[str, str] = field(default_factory=dict)
    critical_path: Mapping[str, float] = field(default_factory=dict)
    recorded_at: str = ""
    # A plan made by `forge combine`: each plan combined -> its integration head then.
    combined: Mapping[str, str] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.plan.name

    def as_waves(self) -> Waves:
        return Waves.of(self.waves, self.deferrals)

    def to_dict(self) -> JsonObject:
        return {
            "schema_version": SCHEMA_VERSION,
            "plan": self.plan.to_dict(),
            "source_path": None if self.source_path is None else str(self.source_path),
            "source_sha256": self.source_sha256,
            "base_ref": self.base_ref,
            "base_commit": self.base_commit,
            "waves": [list(w) for w in self.waves],
            "deferrals": dict(self.deferrals),
            "critical_path": dict(self.critical_path),
            "recorded_at": self.recorded_at,
            "combined": dict(self.combined),
        }

    @classmethod
    def from_dict(cls, data: JsonObject) -> Recorded:
        src = data.get("source_path")
        return cls(
            plan=Plan.from_dict(data["plan"]),
            source_path=None if src is None else Path(src),
            source_sha256=data["source_sha256"],
            base_ref=data["base_ref"],
            base_commit=data["base_commit"],
            waves=tuple(tuple(w) for w in data["waves"]),
            deferrals=dict(data.get("deferrals", {})),
            critical_path={k: float(v) for k, v in data.get("critical_path", {}).items()},
            recorded_at=data.get("recorded_at", ""),
            combined=dict(data.get("combined", {})),
        )


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def load_plan_told(path: Path, defined: Collection[str]) -> tuple[Plan, bytes]:
    """The plan file and its bytes; when it has mistakes, its unknown agent names
    (`defined`: forge.toml's agents) are told with them, in line order."""
    try:
        return load_plan_source(path)
    except PlanError as err:
        from forge.plan.specs import name_problems

        extra = name_problems(path, defined)
        if not extra:
            raise
        problems = sorted([*err.problems, *extra], key=_line_of)
        raise PlanError(problems) from None


def _line_of(problem: str) -> int:
    """The line a `FILE:LINE: message` problem names (0 when none)."""
    parts = problem.split(":", 2)
    return int(parts[1]) if len(parts) > 2 and parts[1].isdigit() else 0


def check(plan_path: Path) -> tuple[Plan, Waves]:
    """Validate a plan file and compute its waves; needs no repository, writes nothing."""
    from forge.git.repo import discover
    from forge.plan.dag import compute_waves
    from forge.plan.repo_config import load_repo_config
    from forge.plan.specs import check_specs

    # The agents `forge plan` would check against: forge.toml's, when there is a
    # repository to read it from, under the plan's own.
    try:
        root = discover().root
    except ForgeError:
        root = None  # no repository here: only the plan's own agents
    # A broken forge.toml is an error here as it is for `forge plan`: both must agree.
    config = load_repo_config(root) if root is not None else None
    defs = dict(config.agents) if config is not None else {}
    plan = load_plan_told(plan_path, defs)[0]
    waves = compute_waves(plan)
    check_specs(plan, plan.agent_tables(defs), pool=config.auto if config else ())
    return plan, waves


def _base(repo: Repository, plan: Plan) -> tuple[str, str]:
    if plan.base is not None:
        return plan.base, repo.rev_parse(plan.base)
    if repo.ref_value("HEAD^{commit}") is None:
        raise ForgeError(
            f"HEAD names no commit yet in {repo.root}: make a first commit, "
            f"or set `base` in the plan"
        )
    return repo.current_branch() or "HEAD", repo.rev_parse("HEAD")


def _check_refs(repo: Repository, name: str) -> None:
    """Refuse names git could not create: refs are files, so a branch `forge/<name>`
    blocks every `forge/<name>/<task>`, and a branch `forge` blocks them all."""
    for blocker in (refs.FORGE_BRANCHES.rstrip("/"), refs.task_refs(name).rstrip("/")):
        if repo.ref_value(blocker) is not None:
            short = refs.branch_name(blocker)
            raise ForgeError(
                f"a branch named `{short}` exists, so forge cannot create its branches "
                f"`forge/{name}/<task>`; rename that branch (git branch -m {short} ...)"
            )


def check_name(repo: Repository, name: str) -> None:
    """Refuse a name a new plan cannot have (`forge split` and `forge combine` make one)."""
    why = name_problem(name)
    if why:
        raise ForgeError(f"plan name `{name}` is not valid: {why}")
    _check_refs(repo, name)


def _check_same_source(repo: Repository, plan: Plan) -> None:
    """Two plan files with one name would silently take turns in one record (and one
    run state): refuse the second while the first still exists."""
    try:
        old = repo.state.read_plan_record(plan.name)
    except (FileNotFoundError, ForgeError):
        return
    src = old.get("source_path") if isinstance(old, dict) else None
    if src and plan.source and Path(src) != plan.source and Path(src).exists():
        raise ForgeError(
            f"plan '{plan.name}' is already recorded from {src}; give this plan another "
            f'name (`name = "..."` in {plan.source}) or record that file again'
        )


def prepare(repo: Repository, plan_path: Path) -> Recorded:
    """Validate, compute waves and pin the base: everything `record` checks, writing
    nothing."""
    from forge.plan.dag import compute_waves, critical_path
    from forge.plan.repo_config import load_repo_config
    from forge.plan.specs import check_specs

    config = load_repo_config(repo.root)
    plan, raw = load_plan_told(plan_path, config.agents)
    check_specs(plan, plan.agent_tables(config.agents), pool=config.auto)
    waves = compute_waves(plan)
    cpath = critical_path(plan)
    base_ref, base_commit = _base(repo, plan)
    _check_refs(repo, plan.name)
    _check_same_source(repo, plan)
    return Recorded(
        plan=plan,
        source_path=plan.source,
        source_sha256=hashlib.sha256(raw).hexdigest(),
        base_ref=base_ref,
        base_commit=base_commit,
        waves=waves.waves,
        deferrals=dict(waves.deferrals),
        critical_path=cpath,
        recorded_at=datetime.now(UTC).isoformat(timespec="seconds"),
    )


# Given the new version while another process holds the plan's run lock: returns the
# version to write (or raises to refuse), or None when the holder is not a run that
# can take it up (the plan is then busy, as before).
WhileRunning = Callable[[Recorded], "Recorded | None"]


def record(
    repo: Repository, plan_path: Path, *, while_running: WhileRunning | None = None
) -> Recorded:
    """Validate, compute waves, pin the base and write the record atomically.

    Everything that can fail is checked before the first write: an invalid plan
    leaves the previous record (and the disk) as it was.
    """
    return store(repo, prepare(repo, plan_path), while_running=while_running)


def record_lock(repo: Repository, name: str) -> FileLock:
    """Orders writers of plan.json: concurrent `forge plan`s, and a running forge run
    taking up a new version against a `forge plan` checking it."""
    from filelock import FileLock

    pdir = repo.state.plan_dir(name)
    pdir.mkdir(parents=True, exist_ok=True)
    return FileLock(str(pdir / "record.lock"))


def store(
    repo: Repository,
    recorded: Recorded,
    *,
    while_running: WhileRunning | None = None,
    locked: bool = False,
) -> Recorded:
    """Write a prepared record. `locked`: the caller holds the plan's run lock."""
    state = repo.state
    name = recorded.plan.name
    with record_lock(repo, name):
        if locked:
            write_json(state.plan_file(name), recorded.to_dict())
            return recorded
        try:
            # The run lock keeps a plan that is being run from changing under it,
            # unless the run itself agrees to take the new version up.
            with plan_lock(state, name, command="forge plan"):
                write_json(state.plan_file(name), recorded.to_dict())
                return recorded
        except Busy:
            taken = None if while_running is None else while_running(recorded)
            if taken is None:
                raise
        write_json(state.plan_file(name), taken.to_dict())
        return taken


def load_recorded(repo: Repository, name: str) -> Recorded:
    path = repo.state.plan_file(name)
    data = repo.state.read_plan_record(name)
    try:
        return Recorded.from_dict(data)
    except (KeyError, TypeError, ValueError) as exc:
        raise StateError(
            f"recorded plan {path} is not in a form this forge understands ({exc!r}); "
            f"run `forge plan` on its file again"
        ) from exc


def _plan_name_in(path: Path) -> str:
    """The plan name a file declares (or its stem), read leniently: a file that no
    longer parses still names the record it came from."""
    with contextlib.suppress(OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
        name = tomllib.loads(path.read_text(encoding="utf-8")).get("name")
        if isinstance(name, str):
            return name
    return path.stem


def resolve(repo: Repository, ref: str | None, *, cwd: Path | None = None) -> Recorded:
    """The recorded plan `ref` names: a plan name, a plan file, or None for the one
    plan recorded. Refuses a record whose source file changed since `forge plan`."""
    names = repo.state.recorded_plans()
    name = recorded_name(names, ref)
    if name is not None:
        recorded = load_recorded(repo, name)
    else:
        assert ref is not None
        recorded = _recorded_from_file(repo, ref, names, cwd=cwd)
    _refuse_changed(recorded)
    return recorded


def _recorded_from_file(
    repo: Repository, ref: str, names: list[str], *, cwd: Path | None
) -> Recorded:
    """The record made from plan file `ref`: by its recorded source path, else by the
    name the file declares."""
    path = Path(ref)
    if not path.is_absolute():
        path = (cwd or Path.cwd()) / path
    if not path.is_file():
        if looks_like_path(ref):
            raise ForgeError(f"plan file {ref} not found")
        listing = ", ".join(names) if names else "none"
        raise ForgeError(
            f"no plan named '{ref}' is recorded{did_you_mean(ref, names)} (recorded: {listing})"
        )
    path = path.resolve()
    for name in names:
        candidate = load_recorded(repo, name)
        if candidate.source_path == path:
            return candidate
    declared = _plan_name_in(path)
    if declared in names:
        return load_recorded(repo, declared)
    raise ForgeError(f"plan file {ref} is not recorded; run `forge plan {ref}` first")


def _refuse_changed(recorded: Recorded) -> None:
    src = recorded.source_path
    if src is None or not src.is_file():
        return  # the source is gone: the recorded copy is all there is, and it was checked
    if sha256_of(src) != recorded.source_sha256:
        raise ForgeError(
            f"plan file {src} changed since it was recorded; run `forge plan {src}` again"
        )
