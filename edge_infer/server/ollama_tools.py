"""Ollama's tool calling and thinking on /api/chat, over our OpenAI-shaped machinery.

In: `tools` (OpenAI's shape, checked by schemas.ChatCompletionRequest), assistant messages
with `tool_calls` whose arguments are an object (ours: JSON text, with an id), and `tool`
messages without an id (each answers the earliest unanswered call of the assistant message
before it, the one named `tool_name` when it says). Out: server.replies' fields as
Ollama's message: content, `thinking` (our reasoning_content), `tool_calls` with object
arguments. Streamed, a call is sent whole in one line once its arguments are complete.
"""

from __future__ import annotations

import json

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
                    "name": name, "arguments": args if isinstance(args, str) else json.dumps(args)}})
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


def _arguments(text: str) -> dict:
    try:
        args = json.loads(text) if text.strip() else {}
    except ValueError:
        return {}
    return args if isinstance(args, dict) else {}


def message(fields: dict) -> dict:
    """server.replies' whole-reply fields -> Ollama's assistant message."""
    msg: dict = {"role": "assistant", "content": fields.get("content") or ""}
    if fields.get("reasoning_content"):
        msg["thinking"] = fields["reasoning_content"]
    if fields.get("tool_calls"):
        msg["tool_calls"] = [{"function": {"name": c["function"]["name"],
                                           "arguments": _arguments(c["function"]["arguments"])}}
                             for c in fields["tool_calls"]]
    return msg


class _Calls:
    """Streamed OpenAI tool-call deltas gathered into whole calls."""

    def __init__(self):
        self.calls: dict[int, dict] = {}  # index -> {"name", "arguments"}
        self.sent: set[int] = set()

    def add(self, delta: dict) -> None:
        for tc in delta.get("tool_calls") or ():
            call = self.calls.setdefault(tc["index"], {"name": None, "arguments": ""})
            fn = tc.get("function") or {}
            if fn.get("name"):
                call["name"] = fn["name"]
            call["arguments"] += fn.get("arguments") or ""

    def complete(self, final: bool) -> list[dict]:
        """The calls whose arguments are whole JSON now (at the end: all of them), once each."""
        out = []
        for i in sorted(self.calls):
            call = self.calls[i]
            if i in self.sent:
                continue
            try:
                args = json.loads(call["arguments"]) if call["arguments"].strip() else None
            except ValueError:
                args = None
            if not isinstance(args, dict):
                if not final:
                    continue
                args = {}
            self.sent.add(i)
            out.append({"function": {"name": call["name"], "arguments": args}})
        return out


def _piece(out, deltas: list[dict], calls: _Calls, final: bool = False) -> dict | None:
    content = "".join(d.get("content") or "" for d in deltas)
    thinking = "".join(d.get("reasoning_content") or "" for d in deltas)
    for d in deltas:
        calls.add(d)
    whole = calls.complete(final)
    if not (content or thinking or whole):
        return None
    obj = out.piece(content)
    if thinking:
        obj["message"]["thinking"] = thinking
    if whole:
        obj["message"]["tool_calls"] = whole
    return obj


class ShapedPieces:
    """For ndjson.stream_lines: content, thinking and whole tool calls out of the reply."""

    def __init__(self, job, out):
        self.out, self.shaped, self.calls = out, job.shaper.stream(), _Calls()

    def feed(self, text: str, call_began: bool = False) -> dict | None:
        return _piece(self.out, self.shaped.feed(text, call_began), self.calls)

    def finish(self, text: str) -> dict | None:
        deltas = (self.shaped.feed(text) if text else []) + self.shaped.finish()
        return _piece(self.out, deltas, self.calls, final=True)
