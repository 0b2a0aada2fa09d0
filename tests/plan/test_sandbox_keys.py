"""The plan keys of the sandbox: `sockets` (variables or absolute paths), `host_ports`
(port numbers), a task's `network`, a lane table's `network`; each mistake is one
line naming the key."""

from __future__ import annotations

from pathlib import Path

from helpers.gitkit import run_forge
from helpers.runkit import write_plan

TASK = '[[task]]\nid = "a"\nrun = "true"\nfiles = ["a"]\n'


def _check(repo: Path, tmp_path: Path, body: str) -> tuple[int, str]:
    cp = run_forge(repo, "plan", "--check", str(write_plan(tmp_path, body)))
    return cp.returncode, cp.stdout + cp.stderr


def test_sockets_name_variables_or_absolute_paths(repo: Path, tmp_path: Path) -> None:
    code, out = _check(repo, tmp_path, 'sockets = ["SSH_AUTH_SOCK", "/run/x.sock"]\n' + TASK)
    assert code == 0, out
    code, out = _check(repo, tmp_path, 'sockets = ["run/x.sock"]\n' + TASK)
    assert code == 2 and "neither a variable name nor an absolute path" in out, out


def test_network_is_true_or_false_on_a_task_and_a_lane(repo: Path, tmp_path: Path) -> None:
    code, out = _check(repo, tmp_path, TASK + 'check = "true"\nnetwork = true\n')
    assert code == 0, out
    code, out = _check(repo, tmp_path, TASK + 'network = "yes"\n')
    assert code == 2 and "network" in out, out
    lane = '[verify.lanes.net]\ncommand = "true"\nnetwork = "yes"\n'
    code, out = _check(repo, tmp_path, TASK + lane)
    assert code == 2 and "`network` must be true or false" in out, out
    code, out = _check(
        repo, tmp_path, TASK + '[verify.lanes.net]\ncommand = "true"\nnetwork = true\n'
    )
    assert code == 0, out


def test_host_ports_are_port_numbers_each_once(repo: Path, tmp_path: Path) -> None:
    code, out = _check(repo, tmp_path, "host_ports = [11434, 5432]\n" + TASK)
    assert code == 0, out
    for bad in ('["11434"]', "[0]", "[65536]", "[true]", "11434"):
        code, out = _check(repo, tmp_path, f"host_ports = {bad}\n" + TASK)
        assert code == 2 and "host_ports" in out and "port numbers" in out, (bad, out)
    code, out = _check(repo, tmp_path, "host_ports = [11434, 11434]\n" + TASK)
    assert code == 2 and "without repeats" in out, out


def test_a_sandbox_table_holds_the_switch_and_its_keys(repo: Path, tmp_path: Path) -> None:
    """`[sandbox]` with `enabled`, `host_ports` and `sockets` says what `sandbox =`,
    `host_ports =` and `sockets =` say at the top; a key given both ways, or one the
    table does not know, is one line."""
    from forge.plan.load import load_plan

    body = '[sandbox]\nenabled = false\nhost_ports = [11434]\nsockets = ["SSH_AUTH_SOCK"]\n'
    plan = load_plan(write_plan(tmp_path, body + TASK))
    assert (plan.sandbox, plan.host_ports, plan.sockets) == (False, (11434,), ("SSH_AUTH_SOCK",))
    plan = load_plan(write_plan(tmp_path, "[sandbox]\nhost_ports = [8080]\n" + TASK))
    assert (plan.sandbox, plan.host_ports) == (None, (8080,))
    code, out = _check(repo, tmp_path, "host_ports = [1]\n[sandbox]\nhost_ports = [2]\n" + TASK)
    assert code == 2 and "`host_ports` is given twice" in out, out
    code, out = _check(repo, tmp_path, "[sandbox]\nports = [2]\n" + TASK)
    assert code == 2 and "unknown key ports" in out, out
    code, out = _check(repo, tmp_path, '[sandbox]\nhost_ports = ["x"]\n' + TASK)
    assert code == 2 and "port numbers" in out and "Traceback" not in out, out
