"""Nothing crosses from one verification to the next: a change of `.gitattributes`
alone rewrites the verification checkout's files."""

from __future__ import annotations

import sys
from pathlib import Path

from helpers.gitkit import commit_all
from helpers.runkit import plan_and_run, statuses, write_plan
from helpers.userside import comparable, unchanged_but_new, user_side


def test_a_change_of_gitattributes_alone_rewrites_the_checkout(repo: Path, tmp_path: Path) -> None:
    """A task that makes `*.sh` CRLF changes no blob: the checkout must still hold
    what a fresh clone holds, so the lane that refuses CRLF fails it."""
    (repo / "run.sh").write_text("echo hi\n")
    commit_all(repo, "a script")
    lane = "if grep -q \"$(printf '\\r')\" run.sh; then exit 1; fi"
    plan = write_plan(
        tmp_path,
        f"verify = '''{lane}'''\nverify_reruns = 0\n"
        '[[task]]\nid = "a"\nfiles = [".gitattributes"]\n'
        "run = \"echo '*.sh text eol=crlf' > .gitattributes\"\n",
    )
    before = user_side(repo)
    cp = plan_and_run(repo, plan)
    out = cp.stdout + cp.stderr
    assert cp.returncode == 5, out
    assert statuses(repo) == {"a": "FAILED"}, out
    assert unchanged_but_new(before, user_side(repo)) == comparable(before)


def test_a_pth_a_run_writes_into_setups_venv_does_not_pass_the_next(
    repo: Path, tmp_path: Path
) -> None:
    """Setup's products are fingerprinted when setup ends; a run that plants a `.pth`
    (`atexit.register(os._exit, 0)`) into setup's `.venv` makes setup run again
    before the next run, so a broken tree is not PASS."""
    (repo / ".gitignore").write_text(".venv/\n")
    commit_all(repo, "ignore the venv")
    check = ".venv/bin/python -c \"import sys; sys.exit(open('ok.txt').read().strip() != 'ok')\""
    plant = (
        '.venv/bin/python -c "import os, site; open(os.path.join(site.getsitepackages()[0],'
        " 'evil.pth'), 'w').write('import atexit, os; atexit.register(os._exit, 0)')\""
    )
    plan = write_plan(
        tmp_path,
        f"setup = '''{sys.executable} -m venv --without-pip .venv'''\n"
        f"verify = '''{check} && {plant}'''\nverify_reruns = 0\n"
        '[[task]]\nid = "a"\nfiles = ["ok.txt"]\nrun = "echo ok > ok.txt"\n'
        '[[task]]\nid = "b"\nfiles = ["ok.txt"]\ndeps = ["a"]\nrun = "echo broken > ok.txt"\n',
    )
    before = user_side(repo)
    cp = plan_and_run(repo, plan)
    out = cp.stdout + cp.stderr
    assert statuses(repo) == {"a": "MERGED", "b": "FAILED"}, out
    assert cp.returncode == 5, out
    assert unchanged_but_new(before, user_side(repo)) == comparable(before)
