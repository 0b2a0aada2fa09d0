"""Whether the lanes ran in the sandbox is part of a remembered verdict's key: a PASS
remembered without it does not answer for a run with it (and back)."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.runkit import plan_and_run, write_plan

from forge.base import sandbox

pytestmark = pytest.mark.skipif(
    sandbox.unavailable() is not None, reason=f"no sandbox here: {sandbox.unavailable()}"
)

BODY = 'verify = "test -s a.txt"\n[[task]]\nid = "a"\nfiles = ["a.txt"]\nrun = "echo a > a.txt"\n'
REMEMBERED = "remembered verdict"


def test_a_verdict_remembered_without_the_sandbox_does_not_answer_with_it(
    repo: Path, tmp_path: Path
) -> None:
    first = plan_and_run(repo, write_plan(tmp_path, BODY, name="plain"), "plain")
    assert first.returncode == 0, first.stdout + first.stderr
    boxed = plan_and_run(
        repo, write_plan(tmp_path, "sandbox = true\n" + BODY, name="boxed"), "boxed"
    )
    assert boxed.returncode == 0, boxed.stdout + boxed.stderr
    assert REMEMBERED not in boxed.stdout + boxed.stderr
    again = plan_and_run(
        repo, write_plan(tmp_path, "sandbox = true\n" + BODY, name="again"), "again"
    )
    assert again.returncode == 0, again.stdout + again.stderr
    assert REMEMBERED in again.stdout + again.stderr


def test_a_sandboxed_setup_writes_its_caches_into_a_folder_of_forges(
    repo: Path, tmp_path: Path
) -> None:
    setup = (
        'mkdir -p "$UV_CACHE_DIR" "$npm_config_cache" && touch "$UV_CACHE_DIR/wheel" '
        '"$npm_config_cache/tarball" "$XDG_CACHE_HOME/made"'
    )
    body = f"sandbox = true\nsetup = '''{setup}'''\n" + BODY
    cp = plan_and_run(repo, write_plan(tmp_path, body))
    assert cp.returncode == 0, cp.stdout + cp.stderr
    cache = repo / ".git" / "forge" / "setup-cache"
    for made in ("uv/wheel", "npm/tarball", "made"):
        assert (cache / made).is_file(), made
