"""The history forge leaves: commit subjects a person reads (the task's title) and
forge's own facts in trailers, read back by `forge accept`; `forge accept --squash`
and `--squash-plan` land the plan as new commits on the user's branch."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

from helpers.gitkit import FAKES, git, run_forge
from helpers.runkit import plan_and_run, statuses, write_plan

from forge.git.trailers import Facts, facts

PY = shlex.quote(sys.executable)

TWO = """
verify = "test -f a.txt"
verify_reruns = 0
[[task]]
id = "a"
title = "Add the a file"
run = "echo a > a.txt"
files = ["a.txt"]

[[task]]
id = "b"
title = "Add the b file"
run = "echo b > b.txt"
files = ["b.txt"]
deps = ["a"]
"""


def _trailer(repo: Path, rev: str, key: str) -> list[str]:
    out = git(repo, "log", "-1", f"--format=%(trailers:key={key},valueonly)", rev)
    return [line for line in out.splitlines() if line]


def test_commit_subjects_are_titles_and_the_facts_are_trailers(repo: Path, tmp_path: Path) -> None:
    cp = plan_and_run(repo, write_plan(tmp_path, TWO))
    assert cp.returncode == 0, cp.stdout + cp.stderr
    subjects = git(repo, "log", "--first-parent", "--format=%s", "forge/p-integration")
    assert subjects.splitlines()[:2] == ["Add the b file", "Add the a file"]
    head = "forge/p-integration"
    assert _trailer(repo, head, "Forge-Plan") == ["p"]
    assert _trailer(repo, head, "Forge-Task") == ["b"]
    assert _trailer(repo, head, "Forge-Attempt") == ["1"]
    assert git(repo, "log", "-1", "--format=%s", "forge/p/a") == "Add the a file"
    assert _trailer(repo, "forge/p/a", "Forge-Task") == ["a"]
    cp = run_forge(repo, "accept")
    assert cp.returncode == 0, cp.stderr
    assert "landed 2 task(s): p/a, p/b" in cp.stdout


def test_old_subjects_are_still_read() -> None:
    assert facts("forge: merge p/t (attempt 2)\n\nTitle") == Facts("p", "t", 2)
    assert facts("forge: p/t attempt 3\n\nTitle\n") == Facts("p", "t", 3)
    assert facts("forge: merge p/t (codex)\n\nTitle") == Facts("p", "t", None)
    new = "Title\n\nForge-Plan: p\nForge-Task: t\nForge-Attempt: 4\n"
    assert facts(new) == Facts("p", "t", 4)
    assert facts("a commit of the user's\n\nFixes: #3\n") is None


def test_accept_squash_lands_one_commit_a_task(repo: Path, tmp_path: Path) -> None:
    cp = plan_and_run(repo, write_plan(tmp_path, TWO))
    assert cp.returncode == 0, cp.stdout + cp.stderr
    base = git(repo, "rev-parse", "main")
    cp = run_forge(repo, "accept", "--squash")
    assert cp.returncode == 0, cp.stderr
    assert "squashed p into main as 2 commits" in cp.stdout
    assert git(repo, "log", "--format=%s", f"{base}..main").splitlines() == [
        "Add the b file",
        "Add the a file",
    ]
    assert git(repo, "rev-list", "--count", "--merges", f"{base}..main") == "0"
    assert git(repo, "rev-parse", "main^{tree}") == git(
        repo, "rev-parse", "forge/p-integration^{tree}"
    )
    assert _trailer(repo, "main", "Forge-Task") == ["b"]
    assert _trailer(repo, "main", "Forge-Verification")[0].startswith("PASS ")
    assert _trailer(repo, "main", "Forge-Prompt")[0].startswith("sha256:")
    assert "run:\n    echo b > b.txt\n" in git(repo, "log", "-1", "--format=%b", "main")
    assert git(repo, "status", "--porcelain") == ""
    again = run_forge(repo, "accept", "--squash")
    assert again.returncode == 0 and "main already contains forge/p-integration" in again.stdout
    cleaned = run_forge(repo, "clean")
    assert "deleted branch forge/p-integration" in cleaned.stdout, cleaned.stdout


def test_accept_squash_plan_lands_one_commit(repo: Path, tmp_path: Path) -> None:
    cp = plan_and_run(repo, write_plan(tmp_path, TWO))
    assert cp.returncode == 0, cp.stdout + cp.stderr
    base = git(repo, "rev-parse", "main")
    cp = run_forge(repo, "accept", "--squash-plan")
    assert cp.returncode == 0, cp.stderr
    assert git(repo, "rev-list", "--count", f"{base}..main") == "1"
    assert git(repo, "log", "-1", "--format=%s", "main") == "p: Add the a file; Add the b file"
    assert _trailer(repo, "main", "Forge-Task") == ["a", "b"]
    assert git(repo, "rev-parse", "main^{tree}") == git(
        repo, "rev-parse", "forge/p-integration^{tree}"
    )


def test_accept_squash_refuses_a_checkout_it_would_overwrite(repo: Path, tmp_path: Path) -> None:
    cp = plan_and_run(repo, write_plan(tmp_path, TWO))
    assert cp.returncode == 0, cp.stdout + cp.stderr
    (repo / "a.txt").write_text("mine, not committed\n")
    before = git(repo, "rev-parse", "main")
    cp = run_forge(repo, "accept", "--squash")
    assert cp.returncode == 2
    assert "a.txt" in cp.stderr and "move or commit them first" in cp.stderr
    assert git(repo, "rev-parse", "main") == before
    assert (repo / "a.txt").read_text() == "mine, not committed\n"


def test_accept_of_a_flaky_head_says_flaky(repo: Path, tmp_path: Path) -> None:
    counter = tmp_path / "n"
    verify = f"{PY} {FAKES / 'verify_flaky.py'} {counter} 1"
    body = TWO.replace('verify = "test -f a.txt"', f"verify = '''{verify}'''")
    body = body.replace("verify_reruns = 0", "verify_reruns = 2").split('\n[[task]]\nid = "b"')[0]
    cp = plan_and_run(repo, write_plan(tmp_path, body))
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert statuses(repo) == {"a": "MERGED"}
    cp = run_forge(repo, "accept")
    assert cp.returncode == 0, cp.stderr
    assert "(verification FLAKY: lane " in cp.stdout and "passed only on a rerun)" in cp.stdout


HEREDOC = """
[[task]]
id = "h"
title = "Write the notes"
run = '''cat > notes.txt <<EOF
first line
second line
EOF'''
files = ["notes.txt"]
"""


def test_accept_squash_keeps_a_commands_lines_and_says_what_it_did_as_json(
    repo: Path, tmp_path: Path
) -> None:
    cp = plan_and_run(repo, write_plan(tmp_path, HEREDOC))
    assert cp.returncode == 0, cp.stdout + cp.stderr
    cp = run_forge(repo, "accept", "--squash", "--json")
    assert cp.returncode == 0, cp.stderr
    said = json.loads(cp.stdout)
    tip = git(repo, "rev-parse", "main")
    assert said == {
        "plan": "p",
        "branch": "main",
        "how": "squash",
        "commit": tip,
        "integration": git(repo, "rev-parse", "forge/p-integration"),
        "landed": ["p/h"],
        "not_landed": [],
    }
    body = git(repo, "log", "-1", "--format=%b", "main")
    assert "run:\n    cat > notes.txt <<EOF\n    first line\n    second line\n    EOF\n" in body
    again = json.loads(run_forge(repo, "accept", "--json").stdout)
    assert again["how"] == "already" and again["commit"] == tip


def test_accept_merge_names_what_conflicted(repo: Path, tmp_path: Path) -> None:
    plan = write_plan(
        tmp_path, '[[task]]\nid = "s"\nrun = "echo theirs > shared.txt"\nfiles = ["shared.txt"]\n'
    )
    cp = plan_and_run(repo, plan)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    (repo / "shared.txt").write_text("mine\n")
    git(repo, "add", "shared.txt")
    git(repo, "commit", "-qm", "mine")
    before = git(repo, "rev-parse", "main")
    cp = run_forge(repo, "accept", "--merge")
    assert cp.returncode == 2
    assert cp.stderr == (
        "forge: forge/p-integration and main both changed shared.txt (add/add): git cannot "
        "merge them, and main is left as it was; merge by hand "
        "(`git merge forge/p-integration`) to resolve it\n"
    )
    assert git(repo, "rev-parse", "main") == before and git(repo, "status", "--porcelain") == ""
