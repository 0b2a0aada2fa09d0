"""A run's agents, read once: the `[agents.NAME]` tables (the plan's over
forge.toml's, over the presets) become definitions when the run starts, and every
part of the run resolves a spec against them (`book.resolve("claude:opus")`).

A plan of shell commands only names no agent: the book then loads no agent code
(the definitions, presets and output readers are imported on first use)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from forge.errors import ForgeError
from forge.frozen import frozen

if TYPE_CHECKING:
    from forge.agents.definition import AgentDef
    from forge.agents.names import AgentSpec


@frozen
class AgentBook:
    """The definitions of one run's agents, by name (the presets not redefined are
    looked up as they are)."""

    defs: Mapping[str, AgentDef]

    @classmethod
    def of(cls, tables: Mapping[str, Mapping[str, object]]) -> AgentBook:
        """Read the tables; a table that is not sound is the one-line error it gives."""
        defs: dict[str, AgentDef] = {}
        for name, table in tables.items():
            if not isinstance(table, Mapping):
                raise ForgeError(f"[agents.{name}] must be a table")
            from forge.agents.definition import AgentDef
            from forge.agents.presets import over_preset

            defs[name] = AgentDef.from_table(name, over_preset(name, table))
        return cls(defs)

    def resolve(self, spec: AgentSpec | str) -> tuple[AgentDef, AgentSpec]:
        """The definition of `spec`'s agent and the spec with its defaults filled in."""
        from forge.agents.names import AgentSpec
        from forge.agents.spec import filled, preset

        if isinstance(spec, str):
            spec = AgentSpec.parse(spec)
        defn = self.defs.get(spec.name) or preset(spec.name, self.defs)
        return filled(defn, spec)
