"""OpenAI's Responses API (POST /v1/responses, GET and DELETE /v1/responses/{id}), the API
Codex speaks. Stateful as OpenAI's: a stored response (`store`, on by default) is continued
by `previous_response_id`, from a bounded store (server.response_store).

A request becomes our chat request (responses_wire) and runs on the one generation path;
this module renders its reply events as output items (reasoning, message, function_call),
streamed as the Responses events or whole.
"""

from __future__ import annotations

import time
from typing import Callable

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from edge_infer.chat.events import ContentDelta, ReasoningDelta, ToolCallArgsDelta, ToolCallStart
from edge_infer.chat.reply import Reply, ReplyEnd, fold
from edge_infer.server import responses_wire as wire
from edge_infer.server.errors import APIError, SafeJSONResponse
from edge_infer.server.faces import OPENAI
from edge_infer.server.generation import Renderer, generate
from edge_infer.server.jobs import Job
from edge_infer.server.keys import ADMIN
from edge_infer.server.response_store import ResponseStore
from edge_infer.server.openai_wire import sse
from edge_infer.server.schemas import ChatCompletionRequest, parse, validate


class Envelope:
    """What every response object of one request shares; object(...) fills in the rest."""

    def __init__(self, body: wire.ResponsesRequest, model: str):
        self.id, self.created, self.body, self.model = wire.new_id("resp"), int(time.time()), body, model

    def object(self, status: str, output: list[dict], end: ReplyEnd | None = None) -> dict:
        b = self.body
        usage = None
        if end is not None and end.usage is not None:
            u = end.usage
            usage = {"input_tokens": u.prompt_tokens, "input_tokens_details": {"cached_tokens": u.cached_tokens},
                     "output_tokens": u.completion_tokens, "output_tokens_details": {"reasoning_tokens": 0},
                     "total_tokens": u.prompt_tokens + u.completion_tokens}
        incomplete = {"reason": "max_output_tokens"} if status == "incomplete" else None
        return {"id": self.id, "object": "response", "created_at": self.created, "status": status,
                "error": None, "incomplete_details": incomplete, "instructions": b.instructions,
                "max_output_tokens": b.max_output_tokens, "model": self.model, "output": output,
                "parallel_tool_calls": b.parallel_tool_calls, "previous_response_id": b.previous_response_id,
                "reasoning": {"effort": b.reasoning.effort if b.reasoning else None, "summary": None},
                "store": b.store, "temperature": b.temperature if b.temperature is not None else 1.0,
                "text": {"format": {"type": b.text.format.type if b.text and b.text.format else "text"}},
                "tool_choice": b.tool_choice if b.tool_choice is not None else "auto", "tools": b.tools or [],
                "top_p": b.top_p if b.top_p is not None else 1.0, "truncation": "disabled", "usage": usage,
                "metadata": b.metadata or {}}


def status_of(end: ReplyEnd) -> str:
    return "incomplete" if end.finish_reason == "length" else "completed"


class Items:
    """Reply events -> output item events, one item open at a time."""

    def __init__(self):
        self.done: list[dict] = []  # finished items, in output order
        self.kind: str | None = None
        self.item_id, self.text = "", []  # the open item's id and its text or arguments so far
        self.call: tuple[str, str] = ("", "")  # the open function call's call_id and name

    @property
    def index(self) -> int:
        return len(self.done)

    def _open(self, kind: str, item: dict) -> list[tuple[str, dict]]:
        out = self.close()
        self.kind, self.item_id, self.text = kind, item["id"], []
        out.append(("response.output_item.added", {"output_index": self.index, "item": item}))
        if kind == "message":
            out.append(("response.content_part.added", {"item_id": self.item_id, "output_index": self.index,
                                                         "content_index": 0, "part": wire.text_part("")}))
        return out

    def add(self, ev) -> list[tuple[str, dict]]:
        out: list[tuple[str, dict]] = []
        where = {}
        if isinstance(ev, ContentDelta) and ev.text:
            if self.kind != "message":
                out += self._open("message", wire.message_item(wire.new_id("msg"), None, "in_progress"))
            kind, where = "response.output_text.delta", {"content_index": 0, "logprobs": []}
        elif isinstance(ev, ReasoningDelta) and ev.text:
            if self.kind != "reasoning":
                out += self._open("reasoning", wire.reasoning_item(wire.new_id("rs"), "", "in_progress"))
            kind, where = "response.reasoning_text.delta", {"content_index": 0}
        elif isinstance(ev, ToolCallStart):
            self.call = (ev.id, ev.name)
            return out + self._open("function_call", wire.call_item(wire.new_id("fc"), ev.id, ev.name, "",
                                                                    "in_progress"))
        elif isinstance(ev, ToolCallArgsDelta) and self.kind == "function_call":
            kind = "response.function_call_arguments.delta"
        else:
            return out
        delta = ev.fragment if isinstance(ev, ToolCallArgsDelta) else ev.text
        self.text.append(delta)
        return out + [(kind, {"item_id": self.item_id, "output_index": self.index, **where, "delta": delta})]

    def close(self) -> list[tuple[str, dict]]:
        if self.kind is None:
            return []
        text, at = "".join(self.text), {"item_id": self.item_id, "output_index": self.index}
        if self.kind == "message":
            item = wire.message_item(self.item_id, text)
            out = [("response.output_text.done", {**at, "content_index": 0, "text": text, "logprobs": []}),
                   ("response.content_part.done", {**at, "content_index": 0, "part": wire.text_part(text)})]
        elif self.kind == "reasoning":
            item = wire.reasoning_item(self.item_id, text)
            out = [("response.reasoning_text.done", {**at, "content_index": 0, "text": text})]
        else:
            item = wire.call_item(self.item_id, self.call[0], self.call[1], text)
            out = [("response.function_call_arguments.done", {**at, "name": self.call[1], "arguments": text})]
        out.append(("response.output_item.done", {"output_index": self.index, "item": item}))
        self.done.append(item)
        self.kind = None
        return out


class ResponseRenderer(Renderer):
    """response.created, response.in_progress, the items' events, then response.completed (or
    response.incomplete at max_output_tokens) with the whole response; a failure is a
    response.failed event and the stream ends there."""
    face = OPENAI

    def __init__(self, env: Envelope, keep: Callable[[dict, Reply], None]):
        self.env, self.keep = env, keep
        self.items, self.seen, self.seq = Items(), [], 0

    def event(self, kind: str, payload: dict) -> bytes:
        self.seq += 1
        return sse({"type": kind, "sequence_number": self.seq - 1, **payload}, event=kind)

    def start(self):
        yield self.event("response.created", {"response": self.env.object("in_progress", [])})
        yield self.event("response.in_progress", {"response": self.env.object("in_progress", [])})

    def token(self, i, tok, events):
        self.seen += events
        for ev in events:
            for kind, payload in self.items.add(ev):
                yield self.event(kind, payload)

    def end(self, i, end):
        self.seen.append(end)
        for kind, payload in self.items.close():
            yield self.event(kind, payload)
        final = self.env.object(status_of(end), self.items.done, end)
        self.keep(final, fold(self.seen))
        yield self.event(f"response.{final['status']}", {"response": final})

    def failed(self, i, events, err):
        yield from self.token(i, None, events)
        failed = self.env.object("failed", self.items.done)
        failed["error"] = {"code": err.code or "server_error", "message": err.message}
        yield self.event("response.failed", {"response": failed})


class ResponsesAPI:
    def __init__(self, srv, store: ResponseStore | None = None):
        self.srv, self.store = srv, store if store is not None else ResponseStore()

    async def create(self, request: Request) -> Response:
        self.srv.authorize(request)
        body = parse(wire.ResponsesRequest, await self.srv.read_body(request))
        history: list[dict] = []
        if body.previous_response_id is not None:
            found = self.store.get(body.previous_response_id)
            if found is None:
                raise APIError(404, f"no response {body.previous_response_id!r} is stored here: it was never "
                               "stored (store: false), was deleted, or was evicted to keep the store within its "
                               f"caps ({self.store.max_responses} responses)", param="previous_response_id",
                               code="previous_response_not_found")
            history = found.messages
        ours = validate(ChatCompletionRequest, wire.chat_fields(body, history))
        turn = history + wire.input_messages(body.input)
        lease = await self.srv.lease(request, ours.model, ours.keep_alive)
        env = Envelope(body, body.model or lease.name)

        def keep(response: dict, reply: Reply) -> None:
            if body.store:
                self.store.put(response, turn + wire.reply_messages(reply))

        def whole(job: Job) -> Response:
            c = job.choices[0]
            ids = {"reasoning": wire.new_id("rs"), "message": wire.new_id("msg")}
            response = env.object(status_of(c.end), wire.output_items(c.reply, ids), c.end)
            keep(response, c.reply)
            return SafeJSONResponse(response)

        return await generate(self.srv, request, lease, ours, whole=whole,
                              renderer=lambda job: ResponseRenderer(env, keep))

    def _stored(self, request: Request):
        self.srv.authorize(request, ADMIN)  # the store holds every key's conversations
        rid = request.path_params["response_id"]
        return rid, self.store.get(rid)

    async def get(self, request: Request) -> Response:
        rid, found = self._stored(request)
        if found is None:
            raise APIError(404, f"no response {rid!r} is stored here", param="response_id", code="not_found")
        return SafeJSONResponse(found.response)

    async def delete(self, request: Request) -> Response:
        rid, _ = self._stored(request)
        if not self.store.delete(rid):
            raise APIError(404, f"no response {rid!r} is stored here", param="response_id", code="not_found")
        return SafeJSONResponse({"id": rid, "object": "response", "deleted": True})

    def routes(self, counted) -> list[Route]:
        return [Route("/v1/responses", counted("/v1/responses", self.create), methods=["POST"]),
                Route("/v1/responses/{response_id}", counted("/v1/responses", self.get), methods=["GET"]),
                Route("/v1/responses/{response_id}", counted("/v1/responses", self.delete), methods=["DELETE"])]
