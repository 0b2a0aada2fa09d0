"""`forge doctor`: what the sandbox holds on this machine."""

from __future__ import annotations

from forge.cli.kit import JsonOpt, answer, app


@app.command()
def doctor(as_json: JsonOpt = False) -> None:
    """Say what the sandbox holds here (capabilities, namespaces, what is hidden)
    and what forge falls back to where something is missing."""
    from forge.commands import doctor as checks

    data = checks.facts()
    answer(data if as_json else checks.render(data))
