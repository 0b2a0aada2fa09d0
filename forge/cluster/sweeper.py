"""A worker plugin that stops, as each worker starts (and again when a dead one is
restarted), the process groups a worker that died left running on its machine.
Imported only when a run opens a cluster: it needs Dask."""

from __future__ import annotations

from distributed.diagnostics.plugin import WorkerPlugin

from forge.cluster.worker import sweep_orphans


class Sweeper(WorkerPlugin):  # type: ignore[misc]
    name = "forge-sweeper"

    def setup(self, worker: object) -> None:  # noqa: ARG002 the same sweep on every worker
        sweep_orphans()
