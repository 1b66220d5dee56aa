"""What the host, the server and the TUI may ask of a loaded engine."""

from __future__ import annotations

from edge_infer.chat.families import Family, family_for_model


def tool_family(engine, forced: bool = False) -> Family:
    """The tool-call family a loaded engine's model writes in (None: no engine, as for a saved
    conversation's model: Hermes). Server and TUI read replies with this one choice."""
    if engine is None:
        return family_for_model(None)
    return family_for_model(engine.template, engine.info.architecture, forced)
