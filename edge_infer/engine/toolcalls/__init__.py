"""Tool calls out of model text, per family of syntax; pure Python, no llama.cpp.

    parser = parser_for(chat_template, architecture)
    reply = parser.parse(text)                       # ParsedReply
    sp = parser.stream(id_factory); sp.feed(delta) -> events; sp.finish() -> events
"""

from edge_infer.engine.toolcalls.events import (
    ContentDelta, Event, ParsedReply, ReasoningDelta, ToolCall, ToolCallArgsDelta,
    ToolCallStart, fold_events, new_call_id,
)
from edge_infer.engine.toolcalls.reasoning import ReasoningSplitter, opens_in_reasoning
from edge_infer.engine.toolcalls.registry import (
    StreamParser, ToolCallParser, families, family_markers, parser_for, parser_for_engine, parser_named,
    register,
)

__all__ = ["ContentDelta", "Event", "ParsedReply", "ReasoningDelta", "ReasoningSplitter",
           "StreamParser", "ToolCall", "ToolCallArgsDelta", "ToolCallParser", "ToolCallStart",
           "families", "family_markers", "fold_events", "new_call_id", "opens_in_reasoning",
           "parser_for", "parser_for_engine", "parser_named", "register"]
