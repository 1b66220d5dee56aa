"""Tool calls out of model text, one Family per dialect; pure Python, no llama.cpp.

    family = family_for(chat_template, architecture)
    reply = family.parse(text)                       # ParsedReply
    sp = family.stream(id_factory); sp.feed(delta) -> events; sp.finish() -> events
"""

from edge_infer.chat.events import (
    ContentDelta, Event, ParsedReply, ReasoningDelta, ToolCall, ToolCallArgsDelta,
    ToolCallStart, fold_events, new_call_id,
)
from edge_infer.chat.families.family import Family, StreamParser
from edge_infer.chat.families.registry import (
    all_families, call_syntaxes, family_for, family_for_model, family_named, family_names, register, unregister,
)
from edge_infer.chat.reasoning import ReasoningSplitter, opens_in_reasoning

__all__ = ["ContentDelta", "Event", "Family", "ParsedReply", "ReasoningDelta", "ReasoningSplitter",
           "StreamParser", "ToolCall", "ToolCallArgsDelta", "ToolCallStart", "all_families", "call_syntaxes",
           "family_for", "family_for_model", "family_named", "family_names", "fold_events", "new_call_id",
           "opens_in_reasoning", "register", "unregister"]
