"""Fallback: a whole reply that is a JSON call object/array, or one in a ```json fence."""

from __future__ import annotations

from edge_infer.engine.toolcalls.matchers import BareJson, FencedJson
from edge_infer.engine.toolcalls.registry import ToolCallParser, register


def generic_matchers() -> list:
    return [FencedJson(), BareJson()]


@register("generic", None)
def generic() -> ToolCallParser:
    return ToolCallParser("generic", generic_matchers, triggers=("```json", "{", "["))
