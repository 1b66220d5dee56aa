"""OpenAI's Responses API as our chat request: its body, its input items, its output items.

In: `input` (a string, or items: messages with text parts, `function_call`,
`function_call_output`; reasoning items are dropped), `instructions`, function `tools` (the
hosted kinds a client may also list, web_search or a namespace of agents, are left out:
nothing here runs them; Codex lists them every turn),
`tool_choice`, `max_output_tokens`, `reasoning.effort`, `text.format`. Out: chat messages
checked by schemas.ChatCompletionRequest, and a reply as output items.
"""

from __future__ import annotations

import secrets
from typing import Any, Literal, Union

from pydantic import Field

from edge_infer.chat.reply import Reply
from edge_infer.server.errors import bad_request
from edge_infer.server.schemas import Body


def new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(16)}"


class Reasoning(Body):
    effort: Literal["none", "minimal", "low", "medium", "high", "xhigh"] | None = None
    summary: str | None = None


class TextFormat(Body):
    type: Literal["text", "json_object", "json_schema"] = "text"
    name: str | None = None
    schema_: dict | None = Field(None, alias="schema")
    strict: bool | None = None


class Text(Body):
    format: TextFormat | None = None


class ResponsesRequest(Body):
    model: str | None = None
    input: Union[str, list[dict]] = Field(min_length=1)
    instructions: str | None = None
    tools: list[dict] | None = None
    tool_choice: Any = None
    parallel_tool_calls: bool = True
    max_output_tokens: int | None = Field(None, ge=1)
    temperature: float | None = Field(None, ge=0.0, le=2.0)
    top_p: float | None = Field(None, ge=0.0, le=1.0)
    reasoning: Reasoning | None = None
    text: Text | None = None
    stream: bool = False
    store: bool = True
    previous_response_id: str | None = None
    metadata: dict | None = None
    keep_alive: str | float | None = None  # ours (Ollama's): how long the model stays loaded


def _text(content, where: str) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise bad_request("content is text or a list of text parts", where)
    parts = []
    for i, part in enumerate(content):
        if not isinstance(part, dict) or part.get("type") not in ("input_text", "output_text", "text"):
            kind = part.get("type") if isinstance(part, dict) else type(part).__name__
            raise bad_request(f"only text parts are supported here, not {kind!r}", f"{where}[{i}]")
        parts.append(str(part.get("text") or ""))
    return "".join(parts)


def input_messages(items: str | list[dict]) -> list[dict]:
    """Input items as chat messages: consecutive function calls become one assistant message
    with tool_calls, each function_call_output a tool message."""
    if isinstance(items, str):
        return [{"role": "user", "content": items}]
    out: list[dict] = []
    for i, item in enumerate(items):
        where = f"input[{i}]"
        if not isinstance(item, dict):
            raise bad_request("an input item is an object", where)
        kind = item.get("type", "message")
        if kind == "message":
            role = item.get("role")
            if role not in ("user", "assistant", "system", "developer"):
                raise bad_request(f"role must be user, assistant, system or developer, not {role!r}", f"{where}.role")
            out.append({"role": role, "content": _text(item.get("content", ""), f"{where}.content")})
        elif kind == "function_call":
            if not item.get("call_id") or not item.get("name"):
                raise bad_request("a function_call item needs call_id and name", where)
            call = {"id": item["call_id"], "type": "function",
                    "function": {"name": item["name"], "arguments": str(item.get("arguments") or "{}")}}
            if out and out[-1]["role"] == "assistant" and "tool_calls" in out[-1]:
                out[-1]["tool_calls"].append(call)
            else:
                out.append({"role": "assistant", "content": "", "tool_calls": [call]})
        elif kind == "function_call_output":
            if not item.get("call_id"):
                raise bad_request("a function_call_output item needs the call_id it answers", where)
            output = item.get("output")
            out.append({"role": "tool", "tool_call_id": item["call_id"],
                        "content": output if isinstance(output, str) else _text(output, f"{where}.output")})
        elif kind == "reasoning":
            continue  # an earlier turn's reasoning does not go back to the model
        else:
            raise bad_request(f"input items of type {kind!r} are not supported", f"{where}.type")
    return out


def tool_fields(body: ResponsesRequest) -> dict:
    out: dict = {"parallel_tool_calls": body.parallel_tool_calls}
    if body.tools:
        tools = []
        for i, t in enumerate(body.tools):
            if not isinstance(t, dict) or not isinstance(t.get("type"), str):
                raise bad_request("a tool is an object with a type", f"tools[{i}]")
            if t["type"] != "function":
                continue  # hosted tools (web_search, namespaces of agents, ...): none run here
            fn = {k: t[k] for k in ("name", "description", "parameters", "strict") if t.get(k) is not None}
            tools.append({"type": "function", "function": fn})
        if tools:
            out["tools"] = tools
    choice = body.tool_choice
    if isinstance(choice, dict) and choice.get("type") == "function":
        out["tool_choice"] = {"type": "function", "function": {"name": choice.get("name")}}
    elif choice is not None:
        out["tool_choice"] = choice
    return out


def chat_fields(body: ResponsesRequest, history: list[dict]) -> dict:
    """The request as ChatCompletionRequest fields: instructions, the stored conversation it
    continues, then its input."""
    system = [{"role": "system", "content": body.instructions}] if body.instructions else []
    fields: dict = {"model": body.model, "messages": system + history + input_messages(body.input),
                    "stream": body.stream, "keep_alive": body.keep_alive, **tool_fields(body)}
    for ours, theirs in (("max_tokens", body.max_output_tokens), ("temperature", body.temperature),
                         ("top_p", body.top_p)):
        if theirs is not None:
            fields[ours] = theirs
    if body.reasoning is not None and body.reasoning.effort is not None:
        fields["reasoning_effort"] = body.reasoning.effort
    fmt = body.text.format if body.text is not None else None
    if fmt is not None and fmt.type == "json_object":
        fields["response_format"] = {"type": "json_object"}
    elif fmt is not None and fmt.type == "json_schema":
        if fmt.schema_ is None:
            raise bad_request("a json_schema format needs its schema", "text.format.schema")
        fields["response_format"] = {"type": "json_schema", "json_schema": {
            "name": fmt.name or "output", "schema": fmt.schema_, "strict": bool(fmt.strict)}}
    return fields


def output_items(reply: Reply, ids: dict[str, str]) -> list[dict]:
    """A whole reply as output items: its reasoning, its message, its function calls."""
    items: list[dict] = []
    if reply.reasoning:
        items.append(reasoning_item(ids["reasoning"], reply.reasoning))
    if reply.content or not reply.tool_calls:
        items.append(message_item(ids["message"], reply.content or ""))
    items += [call_item(ids.get(f"call{i}") or new_id("fc"), c.id, c.name, c.arguments_json)
              for i, c in enumerate(reply.tool_calls)]
    return items


def reasoning_item(item_id: str, text: str, status: str = "completed") -> dict:
    return {"id": item_id, "type": "reasoning", "summary": [], "status": status,
            "content": [{"type": "reasoning_text", "text": text}] if text else []}


def text_part(text: str) -> dict:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def message_item(item_id: str, text: str | None, status: str = "completed") -> dict:
    return {"id": item_id, "type": "message", "status": status, "role": "assistant",
            "content": [text_part(text)] if text is not None else []}


def call_item(item_id: str, call_id: str, name: str, arguments: str, status: str = "completed") -> dict:
    return {"id": item_id, "type": "function_call", "status": status, "call_id": call_id, "name": name,
            "arguments": arguments}


def reply_messages(reply: Reply) -> list[dict]:
    """A reply as the chat message the next turn's history holds (its reasoning left out)."""
    msg: dict = {"role": "assistant", "content": reply.content or ""}
    if reply.tool_calls:
        msg["tool_calls"] = [{"id": c.id, "type": "function", "function": {"name": c.name,
                                                                            "arguments": c.arguments_json}}
                             for c in reply.tool_calls]
    return [msg]
