"""A verification lane given as a table (`[verify.lanes.NAME]`): what forge reads of
it beyond its `command`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from forge.base.tomlread import Problems

LANE_TABLE_KEYS = ("command", "network")


def lane_network(
    lane_table: Any, *, what: str, problems: Problems, line_of: Callable[[str], int | None]
) -> tuple[str, ...]:
    """The lanes given as tables (`[verify.lanes.NAME] command = "...", network =
    true`) that keep the network in the sandbox."""
    if not isinstance(lane_table, dict):
        return ()
    out = []
    for lane, entry in lane_table.items():
        if not isinstance(entry, dict):
            continue
        label = f"{what}: lane `{lane}`"
        unknown = sorted(set(entry) - set(LANE_TABLE_KEYS))
        if unknown:
            known = ", ".join(LANE_TABLE_KEYS)
            problems.add(
                f"{label}: unknown key `{unknown[0]}` (known: {known})", line=line_of(lane)
            )
        network = entry.get("network", False)
        if not isinstance(network, bool):
            problems.add(f"{label}: `network` must be true or false", line=line_of(lane))
        elif network:
            out.append(lane)
    return tuple(out)
