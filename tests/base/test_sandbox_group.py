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
