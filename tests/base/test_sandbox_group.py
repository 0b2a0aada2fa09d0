"""A sandboxed command as run_group runs it: bwrap's own teardown is never named as
a process the command left running."""

from __future__ import annotations

from pathlib import Path

import pytest

from forge.base import sandbox
from forge.base.procgroup import GroupSpec, run_group
from forge.base.sandbox import Sandbox

pytestmark = pytest.mark.skipif(
    sandbox.unavailable() is not None, reason=f"no sandbox here: {sandbox.unavailable()}"
)


def test_a_command_that_left_nothing_names_no_bwrap(tmp_path: Path) -> None:
    box = Sandbox(writable=(tmp_path,), agents=False, network=False)
    for n in range(10):
        log = tmp_path / f"{n}.log"
        result = run_group(GroupSpec(["true"], cwd=tmp_path, log_path=log, sandbox=box))
        assert result.returncode == 0, log.read_text()
        assert result.left == (), result.left
        assert "bwrap" not in log.read_text()


def test_the_sandbox_hides_forges_private_folder_as_it_hides_its_key(tmp_path: Path) -> None:
    private = tmp_path / "repo" / ".git" / "forge" / "private"
    private.mkdir(parents=True)
    (private / "history.sqlite").write_text("a person's words")
    box = Sandbox(writable=(tmp_path / "work",), readable=(tmp_path / "repo",), agents=False)
    (tmp_path / "work").mkdir()
    log = tmp_path / "log"
    spec = GroupSpec(
        f"cat {private}/history.sqlite; ls -A {private}",
        cwd=tmp_path / "work",
        log_path=log,
        sandbox=box,
        hide=(private,),
    )
    run_group(spec)
    assert "a person's words" not in log.read_text()
    assert "No such file" in log.read_text(), log.read_text()
