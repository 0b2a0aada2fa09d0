"""Without the sandbox (`sandbox = false`), a task's commands, its check and a
verification lane run in a box (forge/base/box.py): forge's key and history are out
of their sight, and what they leave running ends with them, even a daemon that
leaves forge's process group, drops its tag and leaves its folder. Through the CLI,
as whoever runs the tests (root here)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from helpers.gitkit import git
from helpers.runkit import plan_and_run, state, statuses, write_plan

from forge.base import box, seal
from forge.base.files import StateDir
from forge.run.records import history

pytestmark = pytest.mark.skipif(
    box.unavailable() is not None, reason=f"no box here: {box.unavailable()}"
)


def test_a_task_its_check_and_a_lane_see_neither_forges_key_nor_its_history(
    repo: Path, tmp_path: Path
) -> None:
    secret = seal.key()
    assert secret is not None
    key = seal.key_dir() / "key"
    db = StateDir.for_common_dir(repo / ".git").history_file()
    with history.connect(db):
        pass
    assert db.read_bytes().startswith(b"SQLite format 3")
    look = f"cat {key} {db}; ls -A {key.parent} {db.parent}"
    unseen = f"test ! -s {key} && test ! -e {db}"  # the key reads empty
    plan = write_plan(
        tmp_path,
        f"sandbox = false\nverify = '''{unseen}'''\n"
        '[[task]]\nid = "a"\nfiles = ["seen.txt"]\n'
        f"run = '''{{ {look}; }} > seen.txt 2>&1; true'''\n"
        f"check = '''{unseen}'''\n",
    )
    cp = plan_and_run(repo, plan)
    out = cp.stdout + cp.stderr
    assert cp.returncode == 0, out
    assert statuses(repo) == {"a": "MERGED"}, out
    seen = git(repo, "show", "forge/p-integration:seen.txt")
    assert secret.decode() not in seen and "SQLite" not in seen, seen
    assert f"{db}: No such file" in seen, seen
    assert key.read_bytes().strip() == secret and db.stat().st_size > 0


def _running(mark: str) -> list[int]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if mark.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.append(int(pid))
        except OSError:
            continue
    return found


def test_daemons_that_leave_group_tag_and_folder_end_with_their_commands(
    repo: Path, tmp_path: Path
) -> None:
    """A task, its check and a lane each leave a daemon that found nothing of forge's
    to be known by (`cd / && setsid -f env -i ...`): none runs after the run, and
    each is named where its command's result is told."""
    mark = f"forge-boxed-{os.getpid()}"

    def daemon(who: str) -> str:
        return f"(cd / && setsid -f env -i sh -c 'sleep 300; : {mark}-{who}' > /dev/null 2>&1)"

    plan = write_plan(
        tmp_path,
        f"sandbox = false\nverify = '''{daemon('lane')}; true'''\n"
        '[[task]]\nid = "a"\nfiles = ["a.txt"]\n'
        f"run = '''{daemon('run')}; echo a > a.txt'''\n"
        f"check = '''{daemon('check')}; true'''\n",
    )
    cp = plan_and_run(repo, plan)
    out = cp.stdout + cp.stderr
    left = _running(mark)
    for pid in left:
        os.kill(pid, 9)
    assert not left, "a daemon outlived its run"
    assert statuses(repo) == {"a": "MERGED"}, out
    warnings = " ".join(state(repo)["tasks"]["a"]["warnings"])
    for step in ("agent", "check"):
        said = rf"{step} left processes running, stopped: .*(setsid|env|sh) \(pid "
        assert re.search(said, warnings), warnings
    assert re.search(r"lane verify: left processes running, stopped: (setsid|env|sh) \(pid ", out)
