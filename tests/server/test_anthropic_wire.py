"""Anthropic's request shapes as Claude Code sends them (captured from Claude Code 2.1.197),
turned into our chat request: pure, no model."""

from edge_infer.server import anthropic_wire as wire
from edge_infer.server.schemas import ChatCompletionRequest, validate

CLAUDE_CODE = {
    "model": "qwen-coder", "max_tokens": 32000, "stream": True,
    "system": [{"type": "text", "text": "You are Claude Code."},
               {"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
    "messages": [{"role": "user", "content": [{"type": "text", "text": "<system-reminder>ctx</system-reminder>"},
                                              {"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}]},
                 {"role": "system", "content": "A system turn inside the messages."}],
    "tools": [{"name": "Workflow", "description": "d", "input_schema": {"type": "object", "properties": {
        "args": {"description": "any value, verbatim"}}}}],
    "thinking": {"type": "adaptive"}, "output_config": {"effort": "high"},
    "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
    "metadata": {"user_id": "x"},
}


def test_claude_codes_request_becomes_a_valid_chat_request():
    body = wire.MessagesRequest.model_validate(CLAUDE_CODE)
    fields = wire.chat_fields(body)
    ours = validate(ChatCompletionRequest, fields)
    assert [m.role for m in ours.messages] == ["system", "user", "system"]
    assert ours.messages[0].content == "You are Claude Code.Be brief."
    assert ours.reasoning_effort == "high" and ours.reasoning_budget_tokens == 4096
    assert ours.tools_for_prompt[0]["function"]["name"] == "Workflow"


def test_thinking_disabled_or_with_a_budget():
    ask = [{"role": "user", "content": "hi"}]
    off = wire.chat_fields(wire.MessagesRequest(max_tokens=8, messages=ask, thinking={"type": "disabled"}))
    assert off["reasoning_effort"] == "none"
    budget = wire.chat_fields(wire.MessagesRequest(max_tokens=8, messages=ask,
                                                   thinking={"type": "enabled", "budget_tokens": 2048}))
    assert budget["reasoning_budget"] == 2048


def test_a_tool_use_input_reaches_the_engine_as_the_object_it_was():
    """Parsed once at the door: no dict -> JSON text -> dict on the way in."""
    from edge_infer.server.jobs import chat_message

    given = {"city": "Oslo", "days": [1, 2]}
    body = wire.MessagesRequest.model_validate({"model": "m", "max_tokens": 8, "messages": [
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "get_weather", "input": given}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "cold"}]}]})
    ours = validate(ChatCompletionRequest, wire.chat_fields(body))
    [call] = chat_message(ours.messages[1])["tool_calls"]
    assert call["function"] == {"name": "get_weather", "arguments": given}
