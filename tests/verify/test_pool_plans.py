"""Every plan of a repository and the hooks take their verification checkouts from
one pool keyed by setup and env: a second plan with the same setup verifies in the
checkout the first one set up (its virtualenv made once, working there), two
verifications at once each hold a member of their own, `verify_pool_max` bounds
the members (least recently used idle one out), and `forge clean PLAN` leaves the
members another plan or the hooks use."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

from helpers.gitkit import FAKES, commit_all, run_forge
from helpers.runkit import plan_and_run, spawn_forge, statuses, wait_for, write_plan

SETUP = f"{sys.executable} {FAKES / 'venv_tool.py'}"


def _pool(repo: Path) -> Path:
    return Path(os.environ["FORGE_WORKTREES"]) / repo.name / ".verify"


def _members(repo: Path) -> list[Path]:
    return sorted(_pool(repo).glob("shared-*")) if _pool(repo).is_dir() else []


def _plan(tmp: Path, name: str, setups: Path) -> Path:
    """A plan whose setup makes a virtualenv with a tool (and counts where it ran),
    whose check and verification run the tool from it."""
    setup = f'echo "$PWD" >> {setups}; {SETUP}'
    return write_plan(
        tmp,
        f"max_parallel = 1\nsetup = {json.dumps(setup)}\nverify = '.venv/bin/where'\n"
        f'[[task]]\nid = "{name}1"\nrun = "echo {name} > {name}1.txt"\n'
        f'files = ["{name}1.txt"]\ncheck = ".venv/bin/where"\n',
        name=name,
    )


def test_two_plans_share_a_verification_checkout_and_clean_leaves_it(
    repo: Path, tmp_path: Path
) -> None:
    (repo / ".gitignore").write_text(".venv/\n")
    commit_all(repo, "ignore the environment")
    setups = tmp_path / "setups"
    cp = plan_and_run(repo, _plan(tmp_path, "a", setups), "a")
    assert cp.returncode == 0, cp.stdout + cp.stderr
    cp = plan_and_run(repo, _plan(tmp_path, "b", setups), "b")
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert statuses(repo, "b") == {"b1": "MERGED"}
    (member,) = _members(repo)
    # setup ran in each plan's slot, and once in the verification checkout both used
    checkouts = [line for line in setups.read_text().splitlines() if "/.verify/" in line]
    assert checkouts == [str(member / "verify")], setups.read_text()
    disk = json.loads(run_forge(repo, "status", "b", "--disk", "--json").stdout)
    assert disk["disk"]["verification checkouts"] > 0
    assert disk["repository_disk"]["plans' verification checkouts"] > 0
    # no plan named: each plan's (the shared member counted for both) and the total
    every = json.loads(run_forge(repo, "status", "--disk", "--json").stdout)
    assert [every["plans"][p]["verification checkouts"] > 0 for p in "ab"] == [True, True]
    assert set(every["repository_disk"]) == set(disk["repository_disk"])
    text = run_forge(repo, "status", "--disk").stdout.splitlines()
    assert [line.split(":")[0] for line in text] == ["a", "b", "repository (measured now)"]

    dry = run_forge(repo, "clean", "a", "--dry-run")
    said = f"would keep shared verification checkouts {member}: used by plan b too"
    assert said in dry.stdout, dry.stdout
    several = run_forge(repo, "clean", "--dry-run")
    assert several.returncode == 2 and "give --all to clean every plan" in several.stderr
    every = run_forge(repo, "clean", "--all", "--dry-run")
    assert every.returncode == 0, every.stderr
    about = [line for line in every.stdout.splitlines() if str(member) in line]
    assert about == [f"would remove verification checkouts {member}"], every.stdout
    assert run_forge(repo, "accept", "a").returncode == 0
    cp = run_forge(repo, "clean", "a")
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert f"a: kept shared verification checkouts {member}: used by plan b too" in cp.stdout
    assert member.is_dir()
    assert run_forge(repo, "accept", "b", "--merge").returncode == 0
    cp = run_forge(repo, "clean", "b")
    assert f"b: removed shared verification checkouts {member}" in cp.stdout, cp.stdout
    assert _members(repo) == []


def _hanging(marks: Path) -> str:
    """A lane that waits, the first time only, while `go` is missing when the
    verification's key is `cli` (its process tag names the key)."""
    return (
        "k=$(echo \"$FORGE_PROC_TAG\" | awk -F: '{print $(NF-1)}'); "
        f'if [ "$k" = cli ] && [ ! -e {marks}/go ]; then touch {marks}/started; '
        f"while [ ! -e {marks}/go ]; do sleep 0.05; done; fi; true"
    )


def test_verifications_at_once_hold_members_of_their_own_and_the_pool_is_bounded(
    repo: Path, tmp_path: Path
) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    lane = json.dumps(_hanging(marks))
    (repo / "forge.toml").write_text(f"verify_pool_max = 1\n[verify]\ncommand = {lane}\n")
    commit_all(repo, "verify config")
    held = spawn_forge(repo, "verify")
    wait_for((marks / "started").exists, what="forge verify's lane started")
    plan = write_plan(tmp_path, '[[task]]\nid = "t"\nrun = "echo t > t.txt"\nfiles = ["t.txt"]\n')
    cp = plan_and_run(repo, plan)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert len(_members(repo)) == 2  # the plan's verification took a member of its own
    (marks / "go").touch()
    out, err = held.communicate(timeout=120)
    assert held.returncode == 0, out + err
    # past verify_pool_max = 1: the next verification leaves the most recent member only
    again = run_forge(repo, "verify", "--force")
    assert again.returncode == 0, again.stdout + again.stderr
    assert len(_members(repo)) == 1


def test_a_bad_verify_pool_max_is_one_line(repo: Path) -> None:
    for bad, want in (("0", "at least 1, got 0"), ('"3"', "a whole number, got '3'")):
        (repo / "forge.toml").write_text(f"verify_pool_max = {bad}\n[verify]\ncommand = 'true'\n")
        cp = run_forge(repo, "verify")
        assert cp.returncode == 2, cp.stdout + cp.stderr
        assert (
            cp.stderr.strip() == f"forge: {repo / 'forge.toml'}:1: `verify_pool_max` must be {want}"
        )
        assert _members(repo) == []


def test_a_plans_pool_checkout_that_must_be_rebuilt_says_so(repo: Path, tmp_path: Path) -> None:
    for name in "ab":
        body = f'verify = "true"\n[[task]]\nid = "{name}1"\nrun = "echo > {name}.txt"\n'
        plan = write_plan(tmp_path, body + f'files = ["{name}.txt"]\n', name=name)
        cp = plan_and_run(repo, plan, name)
        assert cp.returncode == 0, cp.stdout + cp.stderr
        if name == "a":
            (member,) = _members(repo)
            shutil.rmtree(member / "verify" / ".git")  # what a lane's `rm -rf .git` leaves
    said = [line for line in (cp.stdout + cp.stderr).splitlines() if "rebuilt" in line]
    assert len(said) == 1, said
    assert (
        f"lane verify: checkout {member / 'verify'} must be rebuilt: its `.git` is gone" in said[0]
    )
    assert _members(repo) == [member]
