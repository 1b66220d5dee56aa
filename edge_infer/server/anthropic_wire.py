"""Anthropic's Messages API as our chat request: its body, its content blocks, its errors.

In: `system` (text or text blocks), `messages` whose content is text or blocks (text,
tool_use on assistant turns, tool_result on user turns), `tools` (name, description,
input_schema), `tool_choice` (auto / any / tool / none), `max_tokens` (required),
`stop_sequences`, sampling, `thinking`. Out: the same messages in OpenAI's shape, checked by
schemas.ChatCompletionRequest (one set of rules and messages for every face).
"""

from __future__ import annotations

from typing import Any, Literal, Union

from pydantic import Field

from edge_infer.server.errors import APIError, bad_request
from edge_infer.server.schemas import Body

ANTHROPIC_VERSION = "2023-06-01"
# Anthropic's error types by HTTP status (https://docs.anthropic.com/en/api/errors).
ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
               404: "not_found_error", 408: "timeout_error", 413: "request_too_large",
               429: "rate_limit_error", 503: "overloaded_error", 529: "overloaded_error"}


class Block(Body):
    """One content block; which fields count depends on its type."""
    type: str
    text: str | None = None
    id: str | None = None                     # tool_use
    name: str | None = None                   # tool_use
    input: Any = None                         # tool_use: the arguments, an object
    tool_use_id: str | None = None            # tool_result
    content: Union[str, list["Block"], None] = None  # tool_result: text or text blocks
    is_error: bool | None = None              # tool_result
    thinking: str | None = None               # thinking (an earlier turn's; not sent back)


class Message(Body):
    role: Literal["user", "assistant", "system"]  # Claude Code sends system turns in messages too
    content: Union[str, list[Block]]


class Tool(Body):
    name: str
    description: str | None = None
    input_schema: dict = Field(default_factory=lambda: {"type": "object"})
    type: str | None = None  # "custom" or absent; server tools (web search...) are not ours


class ToolChoice(Body):
    type: Literal["auto", "any", "tool", "none"]
    name: str | None = None
    disable_parallel_tool_use: bool = False


class Thinking(Body):
    type: Literal["enabled", "disabled", "adaptive"]  # adaptive: the model decides (Claude Code's)
    budget_tokens: int | None = Field(None, ge=1)


class OutputConfig(Body):
    effort: Literal["low", "medium", "high", "max"] | None = None


class MessagesRequest(Body):
    model: str | None = None
    max_tokens: int = Field(ge=1)
    messages: list[Message] = Field(min_length=1)
    system: Union[str, list[Block], None] = None
    stop_sequences: list[str] | None = Field(None, max_length=16)
    temperature: float | None = Field(None, ge=0.0, le=1.0)
    top_p: float | None = Field(None, ge=0.0, le=1.0)
    top_k: int | None = Field(None, ge=0)
    stream: bool = False
    tools: list[Tool] | None = None
    tool_choice: ToolChoice | None = None
    thinking: Thinking | None = None
    output_config: OutputConfig | None = None  # effort: how much the model may think
    keep_alive: str | float | None = None  # ours (Ollama's): how long the model stays loaded


class CountTokensRequest(Body):
    model: str | None = None
    messages: list[Message] = Field(min_length=1)
    system: Union[str, list[Block], None] = None
    tools: list[Tool] | None = None
    tool_choice: ToolChoice | None = None


def error_body(exc: APIError) -> dict:
    """{"type": "error", "error": {"type", "message"}}: the field at fault named in the message.
    The Anthropic face's one error body (server.faces)."""
    kind = ERROR_TYPES.get(exc.status, "api_error" if exc.status >= 500 else "invalid_request_error")
    return {"type": "error", "error": {"type": kind, "message": exc.message_naming_field()}}


def _text(content, where: str) -> str:
    """Text content (a string or text blocks) as one string."""
    if content is None or isinstance(content, str):
        return content or ""
    parts = []
    for i, b in enumerate(content):
        if b.type != "text":
            raise bad_request(f"only text blocks can go here, not {b.type!r}", f"{where}[{i}].type")
        parts.append(b.text or "")
    return "".join(parts)


def chat_messages(system, messages: list[Message]) -> list[dict]:
    """Anthropic's turns as OpenAI's: a tool_use block is a tool call of the assistant's
    message, a tool_result block a `tool` message answering it (before the user's text)."""
    out: list[dict] = [{"role": "system", "content": _text(system, "system")}] if system else []
    for i, m in enumerate(messages):
        if isinstance(m.content, str) or m.role == "system":
            out.append({"role": m.role, "content": _text(m.content, f"messages[{i}].content")})
            continue
        text, calls, results = [], [], []
        for j, b in enumerate(m.content):
            where = f"messages[{i}].content[{j}]"
            if b.type == "text":
                text.append(b.text or "")
            elif b.type == "tool_use" and m.role == "assistant":
                if not b.id or not b.name:
                    raise bad_request("a tool_use block needs an id and a name", where)
                if not isinstance(b.input, dict):
                    raise bad_request("a tool_use block's input must be an object", f"{where}.input")
                calls.append({"id": b.id, "type": "function",
                              "function": {"name": b.name, "arguments": b.input}})
            elif b.type == "tool_result" and m.role == "user":
                if not b.tool_use_id:
                    raise bad_request("a tool_result block needs the tool_use_id it answers", where)
                content = _text(b.content, f"{where}.content")
                results.append({"role": "tool", "tool_call_id": b.tool_use_id,
                                "content": f"Error: {content}" if b.is_error else content})
            elif b.type in ("thinking", "redacted_thinking") and m.role == "assistant":
                continue  # an earlier turn's reasoning does not go back to the model
            else:
                raise bad_request(f"{b.type!r} blocks are not supported in {m.role} messages", f"{where}.type")
        out += results
        if m.role == "assistant":
            out.append({"role": "assistant", "content": "".join(text), **({"tool_calls": calls} if calls else {})})
        elif text or not results:
            out.append({"role": "user", "content": "".join(text)})
    return out


def openai_tools(tools: list[Tool] | None, choice: ToolChoice | None) -> dict:
    """tools and tool_choice (and parallel_tool_calls) in OpenAI's shape."""
    out: dict = {}
    if tools:
        for i, t in enumerate(tools):
            if t.type not in (None, "custom"):
                raise bad_request(f"server tool {t.type!r} is not available here: only custom tools",
                                  f"tools[{i}].type")
        out["tools"] = [{"type": "function", "function": {
            "name": t.name, **({"description": t.description} if t.description else {}),
            "parameters": t.input_schema}} for t in tools]
    if choice is not None:
        if choice.type == "tool":
            if not choice.name:
                raise bad_request("tool_choice of type 'tool' names the tool", "tool_choice.name")
            out["tool_choice"] = {"type": "function", "function": {"name": choice.name}}
        else:
            out["tool_choice"] = {"auto": "auto", "any": "required", "none": "none"}[choice.type]
        if choice.disable_parallel_tool_use:
            out["parallel_tool_calls"] = False
    return out


def chat_fields(body: MessagesRequest) -> dict:
    """The whole request as ChatCompletionRequest fields."""
    fields: dict = {"model": body.model, "messages": chat_messages(body.system, body.messages),
                    "max_tokens": body.max_tokens, "stream": body.stream, "keep_alive": body.keep_alive,
                    **openai_tools(body.tools, body.tool_choice)}
    if body.stop_sequences:
        fields["stop"] = body.stop_sequences
    for name in ("temperature", "top_p", "top_k"):
        if getattr(body, name) is not None:
            fields[name] = getattr(body, name)
    if body.thinking is not None and body.thinking.type == "disabled":
        fields["reasoning_effort"] = "none"
    elif body.thinking is not None and body.thinking.budget_tokens is not None:
        fields["reasoning_budget"] = body.thinking.budget_tokens  # the engine closes <think> after these
    elif body.output_config is not None and body.output_config.effort is not None:
        fields["reasoning_effort"] = {"max": "xhigh"}.get(body.output_config.effort, body.output_config.effort)
    return fields
