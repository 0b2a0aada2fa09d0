"""A cluster worker's slot is contained as a local slot is: forge's git on the worker
never runs what a task left in its `.git`, the task's reviewer runs on the worker,
and `sandbox = true` runs the worker's commands under bubblewrap."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.gitkit import FAKES, forge_cmd, git, run_forge
from helpers.runkit import merge_count, plan_and_run, state, statuses, write_plan

from forge.base import sandbox

pytest.importorskip("distributed")

PY = sys.executable
REVIEWER = [PY, str(FAKES / "reviewer.py")]


def _cache() -> Path:
    return Path(os.environ["FORGE_WORKTREES"]) / "repo" / "p" / ".cluster"


def test_what_a_task_leaves_in_its_git_dir_never_runs_on_the_worker(
    repo: Path, tmp_path: Path
) -> None:
    ran = tmp_path / "ran"
    ran.mkdir()
    # A git dir for `commondir` to lead to, whose config would run a command.
    evil = tmp_path / "evil.git"
    git(tmp_path, "init", "-q", "--bare", str(evil))
    git(evil, "config", "core.fsmonitor", f"touch {ran}/commondir")
    config = (
        "echo c > c.txt"
        f" && git config filter.x.clean 'touch {ran}/filter; cat'"
        f" && git config filter.x.smudge 'touch {ran}/smudge; cat'"
        f" && git config core.fsmonitor 'touch {ran}/fsmonitor'"
        " && mkdir -p .git/hooks-evil"
        f" && printf '#!/bin/sh\\ntouch {ran}/hook\\n' > .git/hooks-evil/post-checkout"
        " && chmod +x .git/hooks-evil/post-checkout"
        " && git config core.hooksPath .git/hooks-evil"
        " && a=$(git rev-parse --git-path info/attributes)"
        ' && mkdir -p "$(dirname "$a")" && echo "* filter=x" > "$a"'
    )
    commondir = f'echo d > d.txt && echo {evil} > "$(git rev-parse --git-dir)/commondir"'
    body = (
        f'[[task]]\nid = "c"\nrun = {json.dumps(config)}\nfiles = ["c.txt"]\n'
        f'[[task]]\nid = "d"\nrun = {json.dumps(commondir)}\nfiles = ["d.txt"]\n'
        # Runs after both, in a slot one of them left: nothing of theirs runs either.
        '[[task]]\nid = "e"\nrun = "echo e > e.txt"\nfiles = ["e.txt"]\ndeps = ["c", "d"]\n'
    )
    cp = plan_and_run(repo, write_plan(tmp_path, body), "--cluster", "local:2")
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert statuses(repo) == {"c": "MERGED", "d": "MERGED", "e": "MERGED"}
    attempts = [a for t in state(repo)["tasks"].values() for a in t["attempts"]]
    assert all("tls://127.0.0.1" in a["where"] for a in attempts)
    assert git(repo, "show", "forge/p-integration:c.txt") == "c"
    assert git(repo, "show", "forge/p-integration:d.txt") == "d"
    assert sorted(os.listdir(ran)) == []  # no filter, fsmonitor, hook or common dir ran
    # The task's config stayed in its slot: the worker's mirror is as forge made it.
    [home] = list(_cache().iterdir())
    mirror_config = (home / "mirror.git" / "config").read_text()
    assert "filter" not in mirror_config and "fsmonitor" not in mirror_config


def test_a_task_that_breaks_its_git_dir_on_a_worker_fails_by_name(
    repo: Path, tmp_path: Path
) -> None:
    body = '[[task]]\nid = "b"\nrun = "echo b > b.txt && rm -rf .git"\nfiles = ["b.txt"]\n'
    cp = plan_and_run(repo, write_plan(tmp_path, body), "--cluster", "local:1")
    assert cp.returncode == 5, cp.stdout + cp.stderr
    [first] = state(repo)["tasks"]["b"]["attempts"]
    assert first["status"] == "FAILED"
    assert first["reason"].startswith("the task broke its worktree's git directory")


def _reviewed(reviewer: list[str]) -> str:
    worker = f"{PY} {FAKES}/agent_edit.py $FORGE_TASK.txt"
    return (
        'agent = "worker"\nreview = "rev"\n'
        f"[agents.worker]\ncommand = {json.dumps(['bash', '-c', worker])}\n"
        f"[agents.rev]\ncommand = {json.dumps(reviewer)}\n"
        '[[task]]\nid = "t"\ntitle = "the t task"\nprompt = "write t"\nfiles = ["t.txt"]\n'
    )


@pytest.mark.slow
def test_a_reviewer_approves_on_the_worker(repo: Path, tmp_path: Path) -> None:
    copy = tmp_path / "review-prompt.md"
    reviewer = [*REVIEWER, "t.txt", "edit by t", "--copy-prompt", str(copy)]
    cp = plan_and_run(repo, write_plan(tmp_path, _reviewed(reviewer)), "--cluster", "local:2")
    assert cp.returncode == 0, cp.stdout + cp.stderr
    [only] = state(repo)["tasks"]["t"]["attempts"]
    assert only["status"] == "MERGED" and "tls://127.0.0.1" in only["where"]
    assert only["review"]["verdict"] == "approve" and only["review"]["agent"] == "rev"
    assert Path(only["review"]["log"]).is_file()  # brought back with the attempt's logs
    prompt = copy.read_text()  # the task's prompt, its files and the diff
    assert "write t" in prompt and "`t.txt`" in prompt and "+edit by t attempt 1" in prompt


def test_a_reviewer_rejects_on_the_worker_and_the_findings_come_back(
    repo: Path, tmp_path: Path
) -> None:
    reviewer = [*REVIEWER, "t.txt", "never there", "--findings", "t.txt needs tests"]
    body = _reviewed(reviewer)
    cp = plan_and_run(repo, write_plan(tmp_path, body), "--cluster", "local:2")
    assert cp.returncode == 5, cp.stdout + cp.stderr
    [first] = state(repo)["tasks"]["t"]["attempts"]
    assert first["status"] == "FAILED" and first["reason"] == "review: t.txt needs tests"
    assert first["review"]["verdict"] == "reject"
    assert first["feedback_source"] == "review"
    assert Path(first["log"]).read_text() == "t.txt needs tests\n"  # the next attempt's feedback
    assert merge_count(repo, "t") == 0


def test_the_sandbox_holds_on_a_worker(repo: Path, tmp_path: Path) -> None:
    missing = sandbox.unavailable()
    if missing:
        pytest.skip(missing)
    outside = tmp_path / "outside.txt"
    run = f"echo s > s.txt && (echo x > {outside} || true)"
    body = f'sandbox = true\n[[task]]\nid = "s"\nrun = {json.dumps(run)}\nfiles = ["s.txt"]\n'
    cp = plan_and_run(repo, write_plan(tmp_path, body), "--cluster", "local:2")
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert statuses(repo) == {"s": "MERGED"}
    assert git(repo, "show", "forge/p-integration:s.txt") == "s"
    assert not outside.exists()  # outside the slot: read-only under bubblewrap


def test_a_worker_without_bubblewrap_refuses_the_sandbox(tmp_path: Path) -> None:
    """A worker's answer when the run asks for the sandbox and it has no bwrap (run
    where it is called, outside Dask, with a PATH that holds no bwrap)."""
    script = tmp_path / "job.py"
    script.write_text(
        "from forge.cluster.job import Job\n"
        "from forge.cluster.worker import run_job\n"
        "from forge.run.attempt.order import WorkOrder\n"
        "order = WorkOrder('t', 1, 1, 'base', 'm', ('x',), False, 10.0, run='true')\n"
        "job = Job('p/t/1/n', order, '/nowhere', 'refs/j', 'refs/r', 'base', {}, 'stop',\n"
        "          1.0, 'tag', sandbox=True)\n"
        "res = run_job(job)\n"
        "print(res.outcome.status.value if res.outcome else None)\n"
        "print(res.refused)\n"
    )
    env = {**os.environ, "PATH": os.path.dirname(PY), "FORGE_WORKER_CACHE": str(tmp_path / "c")}
    cp = subprocess.run([PY, str(script)], capture_output=True, text=True, env=env, timeout=60)
    assert cp.returncode == 0, cp.stderr
    status, refused = cp.stdout.splitlines()
    assert status == "INTERRUPTED"
    assert "cannot run the sandbox" in refused and "bubblewrap (bwrap)" in refused
    assert "install bubblewrap" in refused
    assert not (tmp_path / "c").exists()  # refused before it touched its cache


def test_a_run_whose_worker_cannot_sandbox_pauses_saying_why(repo: Path, tmp_path: Path) -> None:
    """Through the CLI: a `bwrap` first on PATH that fails on the workers only (their
    environment names their cache), as one without user namespaces does."""
    missing = sandbox.unavailable()
    if missing:
        pytest.skip(missing)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "bwrap"
    real = shutil.which("bwrap")
    shim.write_text(
        "#!/bin/sh\n"
        'if [ -n "$FORGE_WORKER_CACHE" ]; then echo "no user namespaces" >&2; exit 1; fi\n'
        f'exec {real} "$@"\n'
    )
    shim.chmod(0o755)
    body = 'sandbox = true\n[[task]]\nid = "s"\nrun = "echo s > s.txt"\nfiles = ["s.txt"]\n'
    path = os.pathsep.join([str(bin_dir), os.environ["PATH"]])
    cp = run_forge(repo, "plan", str(write_plan(tmp_path, body)))
    assert cp.returncode == 0, cp.stderr
    cp = subprocess.run(
        forge_cmd("run", "--cluster", "local:1"),
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "PATH": path},
    )
    out = cp.stdout + cp.stderr
    assert cp.returncode == 8, out
    assert "cannot run the sandbox" in out and "no user namespaces" in out
    assert "Traceback" not in out
    [first] = state(repo)["tasks"]["s"]["attempts"]
    assert first["status"] == "INTERRUPTED"  # no attempt spent


def test_a_workers_contained_slot_is_set_up_once(repo: Path, tmp_path: Path) -> None:
    """The setup's record lives in forge's own git dir of the worker's slot: kept
    across attempts, as a local slot's is."""
    count = tmp_path / "setups"
    body = f"setup = {json.dumps(f'echo x >> {count}')}\n"
    for tid, deps in (("a", "[]"), ("b", '["a"]'), ("c", '["b"]')):
        body += f'[[task]]\nid = "{tid}"\nrun = "echo {tid} > {tid}.txt"\nfiles = ["{tid}.txt"]\n'
        body += f"deps = {deps}\n"
    cp = plan_and_run(repo, write_plan(tmp_path, body), "--cluster", "local:1")
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert statuses(repo) == {"a": "MERGED", "b": "MERGED", "c": "MERGED"}
    assert count.read_text() == "x\n"
