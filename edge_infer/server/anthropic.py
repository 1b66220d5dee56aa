"""Anthropic's Messages API (POST /v1/messages, /v1/messages/count_tokens), so Claude Code
and the `anthropic` client work against this server (ANTHROPIC_BASE_URL).

A request becomes our chat request (anthropic_wire) and runs on the one generation path
(server.generation); this module renders its reply events as Anthropic's content blocks
(text, thinking, tool_use), streamed as its SSE events or whole.
"""

from __future__ import annotations

import uuid

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from edge_infer.chat.events import ContentDelta, ReasoningDelta, ToolCallArgsDelta, ToolCallStart
from edge_infer.chat.reply import Reply, ReplyEnd, ToolCallDone
from edge_infer.server import anthropic_wire as wire
from edge_infer.server.errors import SafeJSONResponse
from edge_infer.server.faces import ANTHROPIC
from edge_infer.server.generation import Renderer, generate
from edge_infer.server.jobs import Job, chat_message
from edge_infer.server.openai_wire import sse
from edge_infer.server.routing import guarded
from edge_infer.server.schemas import ChatCompletionRequest, parse, validate

STOP_REASONS = {"tool_calls": "tool_use", "length": "max_tokens"}


def stop_reason(end: ReplyEnd) -> str:
    if end.finish_reason == "stop" and end.stop_sequence is not None:
        return "stop_sequence"
    return STOP_REASONS.get(end.finish_reason, "end_turn")


class Blocks:
    """Reply events -> content_block_start / _delta / _stop events, one block at a time."""

    def __init__(self):
        self.index, self.kind = -1, None  # the open block (kind None: none open)

    def _open(self, kind: str, block: dict) -> list[tuple[str, dict]]:
        out = self.close()
        self.index, self.kind = self.index + 1, kind
        return out + [("content_block_start", {"type": "content_block_start", "index": self.index,
                                               "content_block": block})]

    def _delta(self, delta: dict) -> tuple[str, dict]:
        return "content_block_delta", {"type": "content_block_delta", "index": self.index, "delta": delta}

    def close(self) -> list[tuple[str, dict]]:
        if self.kind is None:
            return []
        self.kind = None
        return [("content_block_stop", {"type": "content_block_stop", "index": self.index})]

    def add(self, ev) -> list[tuple[str, dict]]:
        out: list[tuple[str, dict]] = []
        if isinstance(ev, ContentDelta) and ev.text:
            if self.kind != "text":
                out += self._open("text", {"type": "text", "text": ""})
            out.append(self._delta({"type": "text_delta", "text": ev.text}))
        elif isinstance(ev, ReasoningDelta) and ev.text:
            if self.kind != "thinking":
                out += self._open("thinking", {"type": "thinking", "thinking": "", "signature": ""})
            out.append(self._delta({"type": "thinking_delta", "thinking": ev.text}))
        elif isinstance(ev, ToolCallStart):
            out += self._open("tool_use", {"type": "tool_use", "id": ev.id, "name": ev.name, "input": {}})
        elif isinstance(ev, ToolCallArgsDelta) and self.kind == "tool_use":
            out.append(self._delta({"type": "input_json_delta", "partial_json": ev.fragment}))
        return out


def message_of(msg_id: str, model: str, reply: Reply, end: ReplyEnd, input_tokens: int) -> dict:
    """A whole reply as Anthropic's message."""
    content: list[dict] = []
    if reply.reasoning:
        content.append({"type": "thinking", "thinking": reply.reasoning, "signature": ""})
    if reply.content or not reply.tool_calls:
        content.append({"type": "text", "text": reply.content or ""})
    content += [{"type": "tool_use", "id": c.id, "name": c.name, "input": ToolCallDone(i, c).arguments()}
                for i, c in enumerate(reply.tool_calls)]
    output = end.usage.completion_tokens if end.usage else 0
    return {"id": msg_id, "type": "message", "role": "assistant", "model": model, "content": content,
            "stop_reason": stop_reason(end), "stop_sequence": end.stop_sequence,
            "usage": {"input_tokens": input_tokens, "output_tokens": output}}


class MessageRenderer(Renderer):
    """message_start, ping, the content blocks' events, message_delta (stop_reason, usage),
    message_stop; a failure is an `error` event and the stream ends there."""
    face = ANTHROPIC

    def __init__(self, job: Job, msg_id: str, model: str):
        self.job, self.msg_id, self.model, self.blocks = job, msg_id, model, Blocks()

    def start(self):
        self.input_tokens = self.job.prompt_tokens()
        yield sse({"type": "message_start", "message": {
            "id": self.msg_id, "type": "message", "role": "assistant", "model": self.model, "content": [],
            "stop_reason": None, "stop_sequence": None,
            "usage": {"input_tokens": self.input_tokens, "output_tokens": 0}}}, event="message_start")
        yield sse({"type": "ping"}, event="ping")

    def token(self, i, tok, events):
        for ev in events:
            for name, data in self.blocks.add(ev):
                yield sse(data, event=name)

    def end(self, i, end):
        for name, data in self.blocks.close():
            yield sse(data, event=name)
        output = end.usage.completion_tokens if end.usage else 0
        yield sse({"type": "message_delta",
                   "delta": {"stop_reason": stop_reason(end), "stop_sequence": end.stop_sequence},
                   "usage": {"input_tokens": self.input_tokens, "output_tokens": output}}, event="message_delta")
        yield sse({"type": "message_stop"}, event="message_stop")


class AnthropicAPI:
    def __init__(self, srv):
        self.srv = srv

    def _ours(self, fields: dict) -> ChatCompletionRequest:
        return validate(ChatCompletionRequest, fields)

    async def messages(self, request: Request) -> Response:
        body = parse(wire.MessagesRequest, await self.srv.read_body(request))
        ours = self._ours(wire.chat_fields(body))
        lease = await self.srv.lease(request, ours.model, ours.keep_alive)
        msg_id, model = "msg_" + uuid.uuid4().hex[:24], body.model or lease.name

        def whole(job: Job) -> Response:
            c = job.choices[0]
            return SafeJSONResponse(message_of(msg_id, model, c.reply, c.end, job.prompt_tokens()))

        return await generate(self.srv, request, lease, ours, whole=whole,
                              renderer=lambda job: MessageRenderer(job, msg_id, model))

    async def count_tokens(self, request: Request) -> Response:
        body = parse(wire.CountTokensRequest, await self.srv.read_body(request))
        fields = {"model": body.model, "messages": wire.chat_messages(body.system, body.messages),
                  **wire.openai_tools(body.tools, body.tool_choice)}
        ours = self._ours(fields)
        lease = await self.srv.lease(request, ours.model)
        try:
            n = len(lease.engine.tokenize_messages([chat_message(m) for m in ours.messages], ours.tools_for_prompt))
        finally:
            lease.release()
        return SafeJSONResponse({"input_tokens": n})

    def routes(self, counted) -> list[Route]:
        def route(path: str, handler) -> Route:
            return Route(path, counted(path, guarded(self.srv, ANTHROPIC, handler), ANTHROPIC), methods=["POST"])

        return [route("/v1/messages", self.messages), route("/v1/messages/count_tokens", self.count_tokens)]


def anthropic_routes(srv, counted) -> list[Route]:
    return AnthropicAPI(srv).routes(counted)
