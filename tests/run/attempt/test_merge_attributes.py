"""forge's merges see only the merged trees: attributes in the user's working tree or
their `.git/info/attributes` (a `* merge=union`) never resolve a conflict."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.gitkit import git, run_forge
from helpers.runkit import spawn_forge, state, wait_for, write_plan
from helpers.userside import comparable, unchanged_but_new, user_side


@pytest.mark.parametrize("where", [".git/info/attributes", ".gitattributes"])
def test_the_users_attributes_do_not_resolve_a_conflict(
    repo: Path, tmp_path: Path, where: str
) -> None:
    (repo / "shared.txt").write_text("base\n")
    git(repo, "add", "shared.txt")
    git(repo, "commit", "-q", "-m", "shared")
    (repo / where).parent.mkdir(parents=True, exist_ok=True)
    (repo / where).write_text("* merge=union\n")  # the user's, not committed
    go = tmp_path / "go"
    plan = write_plan(
        tmp_path,
        f"""
scope = "warn"
max_parallel = 2
[[task]]
id = "one"
run = "echo one > shared.txt; echo 1 > one.txt"
files = ["one.txt"]

[[task]]
id = "two"
run = "while [ ! -f {go} ]; do sleep 0.02; done; echo two > shared.txt; echo 2 > two.txt"
files = ["two.txt"]
""",
    )
    assert run_forge(repo, "plan", str(plan)).returncode == 0
    before = user_side(repo)
    p = spawn_forge(repo, "run")
    wait_for(
        lambda: (
            (repo / ".git/forge/plans/p/state.json").exists()
            and state(repo)["tasks"]["one"]["status"] == "MERGED"
        ),
        what="one merged",
    )
    go.write_text("go")
    out, err = p.communicate(timeout=60)
    assert p.returncode == 5, out + err
    two = state(repo)["tasks"]["two"]
    assert two["status"] == "CONFLICT" and "shared.txt" in two["reason"], out + err
    assert git(repo, "show", "forge/p-integration:shared.txt") == "one"
    assert unchanged_but_new(before, user_side(repo)) == comparable(before)
