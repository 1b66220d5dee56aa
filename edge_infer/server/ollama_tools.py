"""Ollama's tool calling and thinking on /api/chat, over our OpenAI-shaped machinery.

In: `tools` (OpenAI's shape, checked by schemas.ChatCompletionRequest), assistant messages
with `tool_calls` whose arguments are an object (kept one; ours add an id), and `tool`
messages without an id (each answers the earliest unanswered call of the assistant message
before it, the one named `tool_name` when it says). Out: server.replies' fields as
Ollama's message: content, `thinking` (our reasoning), `tool_calls` with object
arguments. Streamed, a call is sent whole in one line once its arguments are complete
(chat.reply's ToolCallDone).
"""

from __future__ import annotations


from edge_infer.chat.events import ContentDelta, ReasoningDelta
from edge_infer.chat.reply import Reply, ToolCallDone
from edge_infer.server.errors import bad_request


def chat_messages(messages) -> list[dict]:
    """ollama_wire.Message list -> ChatCompletionRequest messages (OpenAI's shape)."""
    out: list[dict] = []
    pending: list[tuple[str, str | None]] = []  # (id, name) of calls not answered yet
    n = 0
    for i, m in enumerate(messages):
        d: dict = {"role": m.role, "content": m.content or ""}
        if m.tool_calls is not None:
            if m.role != "assistant":
                raise bad_request(f"only assistant messages carry tool_calls (this one is {m.role!r})",
                                  f"messages[{i}].tool_calls")
            calls, pending = [], []
            for j, call in enumerate(m.tool_calls):
                n += 1
                fn = call.get("function") if isinstance(call, dict) else None
                if not isinstance(fn, dict):
                    raise bad_request("a tool call is {\"function\": {\"name\": ..., \"arguments\": {...}}}",
                                      f"messages[{i}].tool_calls[{j}].function")
                args = fn.get("arguments")
                if args is None:
                    args = {}
                if not isinstance(args, (dict, str)):
                    raise bad_request("the arguments of a tool call must be an object",
                                      f"messages[{i}].tool_calls[{j}].function.arguments")
                cid = call.get("id") if isinstance(call.get("id"), str) and call.get("id") else f"call_{n}"
                name = fn.get("name")
                calls.append({"id": cid, "type": "function", "function": {
                    "name": name, "arguments": args}})
                pending.append((cid, name if isinstance(name, str) else None))
            d["tool_calls"] = calls
        elif m.role == "tool":
            if not pending:
                raise bad_request("a tool message answers a call of an earlier assistant message's tool_calls; "
                                  "every call before it is answered already", f"messages[{i}]")
            k = next((k for k, (_, name) in enumerate(pending) if m.tool_name and name == m.tool_name), 0)
            d["tool_call_id"] = pending.pop(k)[0]
            if m.tool_name:
                d["name"] = m.tool_name
        out.append(d)
    return out


def done_reason(finish_reason: str | None) -> str:
    """Ollama says "stop" where OpenAI says "tool_calls"."""
    return "stop" if finish_reason == "tool_calls" else (finish_reason or "stop")


def call(done: ToolCallDone) -> dict:
    return {"function": {"name": done.call.name, "arguments": done.arguments()}}


def message(reply: Reply) -> dict:
    """A whole reply as Ollama's assistant message."""
    msg: dict = {"role": "assistant", "content": reply.content or ""}
    if reply.reasoning:
        msg["thinking"] = reply.reasoning
    if reply.tool_calls:
        msg["tool_calls"] = [call(ToolCallDone(i, c)) for i, c in enumerate(reply.tool_calls)]
    return msg


def piece(out, events) -> dict | None:
    """One token's reply events as a streamed line's object: its content and thinking, and
    each tool call whole once its arguments are (None: nothing to send yet)."""
    content = "".join(ev.text for ev in events if isinstance(ev, ContentDelta))
    thinking = "".join(ev.text for ev in events if isinstance(ev, ReasoningDelta))
    calls = [call(ev) for ev in events if isinstance(ev, ToolCallDone)]
    if not (content or thinking or calls):
        return None
    obj = out.piece(content)
    if thinking:
        obj["message"]["thinking"] = thinking
    if calls:
        obj["message"]["tool_calls"] = calls
    return obj
