"""Which reply reader a request gets: chat replies are read into content, reasoning and tool
calls (in the model family's syntax); text completions are plain text. Every face renders
the reader's typed events (chat.reply), streamed or folded whole."""

from __future__ import annotations

from edge_infer.chat.families import Family
from edge_infer.chat.reply import ReplyReader
from edge_infer.engine import RequestStream, tool_family
from edge_infer.server.schemas import ChatCompletionRequest


def family_for(engine, body, plain: bool = False) -> Family | None:
    """The tool-call family a chat request's reply is read in (None: no tools, or plain text)."""
    if plain or not isinstance(body, ChatCompletionRequest) or not body.tools_for_prompt:
        return None
    return tool_family(engine, forced=bool(body.forced_tool))


def reader_for(engine, body, stream: RequestStream, plain: bool = False) -> ReplyReader:
    """reasoning: "auto" splits a leading <think> block into reasoning, "none" leaves it in the
    content (with tools it is split all the same), "drop" removes it. plain: text as it comes
    (text completions, Ollama's /api/generate). Whether the reply starts inside <think> is the
    engine's decision, carried on the request's stream."""
    if plain or not isinstance(body, ChatCompletionRequest):
        return ReplyReader(None, reasoning="none")
    if not body.include_reasoning:
        reasoning = "drop"
    else:
        reasoning = "none" if body.reasoning_format == "none" else "auto"
    family = family_for(engine, body)
    if family is None and reasoning == "none":
        return ReplyReader(None, reasoning="none")
    return ReplyReader(family, reasoning=reasoning, starts_in_reasoning=stream.starts_in_reasoning,
                       constrained=bool(body.forced_tool))
