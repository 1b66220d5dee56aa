"""Which reply reader a request gets: chat replies are read into content, reasoning and tool
calls (in the model family's syntax); text completions are plain text. Every face renders
the reader's typed events (chat.reply), streamed or folded whole."""

from __future__ import annotations

from edge_infer.chat.reply import ReplyReader
from edge_infer.engine import tool_family
from edge_infer.server.schemas import ChatCompletionRequest


def reader_for(engine, body, plain: bool = False) -> ReplyReader:
    """reasoning: "auto" splits a leading <think> block into reasoning, "none" leaves it in the
    content (with tools it is split all the same), "drop" removes it. plain: text as it comes
    (text completions, Ollama's /api/generate)."""
    if plain or not isinstance(body, ChatCompletionRequest):
        return ReplyReader(None, reasoning="none")
    if not body.include_reasoning:
        reasoning = "drop"
    else:
        reasoning = "none" if body.reasoning_format == "none" else "auto"
    family = tool_family(engine, forced=bool(body.forced_tool)) if body.tools_for_prompt else None
    if family is None and reasoning == "none":
        return ReplyReader(None, reasoning="none")
    template = engine.template
    opens = template is not None and template.opens_reasoning(body.template_vars)
    return ReplyReader(family, reasoning=reasoning, starts_in_reasoning=opens, constrained=bool(body.forced_tool))
