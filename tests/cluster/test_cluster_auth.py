"""The cluster is authenticated: `local:N` speaks TLS with a certificate only the run
holds, a scheduler reached without TLS is refused unless `[cluster] insecure =
true` says so, and a worker's git never runs what a task wrote into its mirror."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.gitkit import git, run_forge
from helpers.runkit import plan_and_run, statuses, wait_for, write_plan

pytest.importorskip("distributed")
pytest.importorskip("cryptography")


def test_a_scheduler_without_tls_is_refused_in_one_line(repo: Path, tmp_path: Path) -> None:
    assert (
        run_forge(repo, "plan", str(write_plan(tmp_path, _one("echo a > a.txt")))).returncode == 0
    )
    cp = run_forge(repo, "run", "--cluster", "tcp://127.0.0.1:8786")
    assert cp.returncode == 2, cp.stdout + cp.stderr
    assert cp.stderr.count("\n") == 1 and "insecure = true" in cp.stderr, cp.stderr
    assert "without TLS" in cp.stderr
    assert git(repo, "for-each-ref", "refs/heads/forge") == ""


def test_a_tls_scheduler_without_certificates_is_refused(repo: Path, tmp_path: Path) -> None:
    assert (
        run_forge(repo, "plan", str(write_plan(tmp_path, _one("echo a > a.txt")))).returncode == 0
    )
    cp = run_forge(repo, "run", "--cluster", "tls://127.0.0.1:8786")
    assert cp.returncode == 2, cp.stdout + cp.stderr
    assert cp.stderr.count("\n") == 1 and "tls_ca, tls_cert and tls_key" in cp.stderr


def _one(run: str) -> str:
    return f"[[task]]\nid = \"a\"\nfiles = [\".\"]\nrun = '''{run}'''\n"


def test_a_local_cluster_speaks_tls_only_to_the_run(repo: Path) -> None:
    """The scheduler `local:N` starts listens on 127.0.0.1, which a task reaches: a
    client without the run's certificate cannot connect, over TCP or TLS."""
    from distributed import Client

    from forge.cluster.coordinator import Cluster, ClusterConfig
    from forge.git.repo import discover

    cluster = Cluster(discover(repo), "p", ClusterConfig("local:1"))
    cluster.open()
    try:
        address = cluster.cluster.scheduler_address
        assert address.startswith("tls://127.0.0.1:")
        assert cluster.client.run(lambda: 1)  # the run's own client is in
        port = address.rsplit(":", 1)[1]
        for scheme in ("tcp", "tls"):
            with pytest.raises(Exception):  # noqa: B017 Dask raises several kinds
                Client(f"{scheme}://127.0.0.1:{port}", timeout=5, set_as_default=False)
    finally:
        cluster.close()


def test_a_hook_a_task_plants_in_the_mirror_never_runs_on_push(repo: Path, tmp_path: Path) -> None:
    ran = tmp_path / "ran"
    hooks = tmp_path / "hooks"
    plant = (
        f"mkdir -p {hooks} && printf '#!/bin/sh\\ntouch {ran}\\n' > {hooks}/pre-push"
        f" && chmod +x {hooks}/pre-push"
        ' && git config --file "$(echo $FORGE_WORKER_CACHE/*/mirror.git)/config"'
        f" core.hooksPath {hooks} && echo a > a.txt"
    )
    body = (
        _one(plant)
        + '[[task]]\nid = "b"\nfiles = ["b.txt"]\nrun = "echo b > b.txt"\ndeps = ["a"]\n'
    )
    cp = plan_and_run(repo, write_plan(tmp_path, body), "--cluster", "local:1")
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert statuses(repo) == {"a": "MERGED", "b": "MERGED"}
    assert (hooks / "pre-push").exists(), "the task planted its hook"
    assert not ran.exists(), "the worker's push ran the task's hook"


def test_a_remote_scheduler_is_reached_with_the_certificates_cluster_names(
    repo: Path, tmp_path: Path
) -> None:
    """A scheduler and a worker started with a CA, a certificate and a key (here one
    certificate for every role); forge.toml names the files; the run lands."""
    from distributed.security import Security

    made = Security.temporary()
    files = {}
    for name, pem in (("ca", made.tls_ca_file), ("cert", made.tls_client_cert)):
        files[name] = tmp_path / f"{name}.pem"
        files[name].write_text(pem)
    files["key"] = tmp_path / "key.pem"
    files["key"].write_text(made.tls_client_key)
    tls = ["--tls-ca-file", str(files["ca"]), "--tls-cert", str(files["cert"])]
    tls += ["--tls-key", str(files["key"])]
    info = tmp_path / "scheduler.json"
    py, where = sys.executable, ["--scheduler-file", str(info), "--no-dashboard", *tls]
    sched = subprocess.Popen(
        [py, "-m", "distributed.cli.dask_scheduler", *where, "--protocol", "tls", "--port", "0"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    worker = None
    try:
        wait_for(lambda: info.exists() and info.stat().st_size > 0, timeout=60, what="scheduler")
        worker = subprocess.Popen(
            [py, "-m", "distributed.cli.dask_worker", *where, "--nthreads", "1", "--no-nanny"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        address = str(json.loads(info.read_text())["address"])
        assert address.startswith("tls://")
        (repo / "forge.toml").write_text(
            f'[cluster]\ntls_ca = "{files["ca"]}"\ntls_cert = "{files["cert"]}"\n'
            f'tls_key = "{files["key"]}"\n'
        )
        plan = write_plan(tmp_path, _one("echo a > a.txt"))
        cp = plan_and_run(repo, plan, "--cluster", address)
        assert cp.returncode == 0, cp.stdout + cp.stderr
        assert statuses(repo) == {"a": "MERGED"}
    finally:
        for p in (sched, worker):
            if p is not None:
                p.kill()
                p.wait()
