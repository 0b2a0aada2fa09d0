"""Every folder forge made for a plan is counted by `forge status --disk`, by kind,
and `forge clean PLAN` removes them all when nothing runs: measured, nothing of the
plan is left on disk."""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path

from helpers.gitkit import FAKES, git, run_forge
from helpers.runkit import plan_and_run, statuses, write_plan

PY = shlex.quote(sys.executable)


def _body(log: Path, ids: list[str]) -> str:
    """Speculation on (a second member of the verification pool beside the gate's);
    setup writes 200 KB of ignored files in every slot and checkout."""
    verify = f"{PY} {FAKES / 'verify_spec.py'} {log} 0.6"
    out = (
        "setup = 'mkdir -p big && head -c 200000 /dev/zero > big/blob'\n"
        f"verify = '''{verify}'''\nverify_reruns = 0\nverify_parallel = 2\nbatch_max = 2\n"
        f"max_parallel = {len(ids)}\n"
    )
    for i, tid in enumerate(ids):
        wait = "" if i == 0 else "sleep 0.3; "
        out += (
            f'[[task]]\nid = "{tid}"\nrun = "{wait}echo {tid} > {tid}.txt"\nfiles = ["{tid}.txt"]\n'
        )
    return out


def _forge_paths(repo: Path) -> list[Path]:
    """What of plan p is on disk, wherever forge puts it."""
    root = Path(os.environ["FORGE_WORKTREES"]) / repo.name
    found = [p for p in root.rglob("*") if "/p/" in f"{p}/" or "/.verify/shared-" in str(p)]
    state = repo / ".git" / "forge"
    found += [p for p in (state / "cluster").glob("p.git")]
    found += [p for p in (state / "verify" / "checkouts").glob("*")]
    found += [p for p in (state / "verify" / "pool").glob("*")]
    found += [p for p in (state / "plans" / "p").glob("logs")]
    return found


def test_disk_counts_every_folder_and_clean_leaves_nothing(repo: Path, tmp_path: Path) -> None:
    (repo / ".gitignore").write_text("big/\n")
    git(repo, "add", ".gitignore")
    git(repo, "commit", "-q", "-m", "ignore what setup makes")
    ids = [f"t{i}" for i in range(4)]
    cp = plan_and_run(repo, write_plan(tmp_path, _body(tmp_path / "log", ids)))
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert statuses(repo) == dict.fromkeys(ids, "MERGED")
    data = json.loads(run_forge(repo, "status", "--disk", "--json").stdout)
    disk, slots = data["disk"], sum(s["bytes"] for s in data["slots"])
    assert set(disk) >= {"task worktrees", "verification checkouts", "logs"}, disk
    assert disk["verification checkouts"] > 200_000 * 2  # the lanes' and a speculation's
    assert sum(disk.values()) > slots
    text = run_forge(repo, "status", "--disk").stdout
    assert "disk (measured now): " in text and "verification checkouts" in text
    members = {p.name for p in _forge_paths(repo) if p.parent.name == ".verify"}
    assert len(members) == 2, members  # the gate's and the speculation's
    assert run_forge(repo, "accept").returncode == 0
    cp = run_forge(repo, "clean", "p")
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert _forge_paths(repo) == []
    after = json.loads(run_forge(repo, "status", "--disk", "--json").stdout)["disk"]
    assert after == {}
    assert "nothing of the plan's on disk" in run_forge(repo, "status", "--disk").stdout


def test_disk_gives_the_repository_total_with_the_hooks_checkouts(
    repo: Path, tmp_path: Path
) -> None:
    (repo / ".gitignore").write_text("big/\n")
    (repo / "forge.toml").write_text(
        "[verify]\ncommand = 'true'\nsetup = 'mkdir -p big && head -c 300000 /dev/zero > big/blob'\n"
    )
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "verify in forge.toml")
    cp = run_forge(repo, "verify")  # no plan yet: a checkout of no plan's
    assert cp.returncode == 0, cp.stdout + cp.stderr
    cp = plan_and_run(repo, write_plan(tmp_path, _body(tmp_path / "log", ["t0"])))
    assert cp.returncode == 0, cp.stdout + cp.stderr
    data = json.loads(run_forge(repo, "status", "--disk", "--json").stdout)
    whole = data["repository_disk"]
    assert whole["other checkouts"] > 300_000, whole
    assert whole["plans' verification checkouts"] >= data["disk"]["verification checkouts"]
    assert sum(whole.values()) > sum(data["disk"].values()) + 300_000
    text = run_forge(repo, "status", "--disk").stdout
    assert "repository (measured now): " in text and "other checkouts" in text, text
