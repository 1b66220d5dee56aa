"""A stand-in remote server (what vLLM or llama-server would be): it lists a model, answers
chat completions with a fixed reply, and misbehaves on request: drops a stream half-way,
answers slowly, refuses with 503. It records what it was sent."""

from __future__ import annotations

import asyncio
import json

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route

from edge_infer.server.launch import BackgroundServer, bind_tcp

REPLY = "Hello from the stand-in."


def chunk(delta: dict, finish=None) -> bytes:
    body = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "upstream-name",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return f"data: {json.dumps(body)}\n\n".encode()


class StandIn:
    def __init__(self, port: int = 0, sick: bool = False):
        self.received: list[tuple[dict, dict]] = []   # (body, headers) of each chat request
        self.sick = sick                               # GET /v1/models answers 503
        self.mode = "ok"                               # ok | drop | slow | refuse
        self.streams_closed = 0                        # streams that ended (finished or client gone)
        app = Starlette(routes=[Route("/v1/models", self.models), Route("/v1/chat/completions", self.chat,
                                                                                methods=["POST"]),
                                Route("/api/chat", self.ollama_chat, methods=["POST"])])
        sock = bind_tcp("127.0.0.1", port)
        self.port = sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self.server = BackgroundServer(app, [sock]).start()

    def stop(self) -> None:
        self.server.stop()

    async def models(self, request: Request):
        if self.sick:
            return JSONResponse({"error": "warming up"}, status_code=503)
        return JSONResponse({"object": "list", "data": [{"id": "upstream-name", "object": "model"}]})

    async def chat(self, request: Request):
        body = await request.json()
        self.received.append((body, dict(request.headers)))
        if self.mode == "refuse":
            return JSONResponse({"error": {"message": "overloaded"}}, status_code=503)
        if self.mode == "slow" and not body.get("stream"):
            await asyncio.sleep(30)
        if not body.get("stream"):
            return JSONResponse({"id": "c1", "object": "chat.completion", "created": 1, "model": "upstream-name",
                                 "choices": [{"index": 0, "message": {"role": "assistant", "content": REPLY},
                                              "finish_reason": "stop"}],
                                 "usage": {"prompt_tokens": 7, "completion_tokens": 5, "total_tokens": 12}})
        return StreamingResponse(self._stream(), media_type="text/event-stream")

    async def _stream(self):
        try:
            yield chunk({"role": "assistant", "content": ""})
            yield chunk({"content": "Hello"})
            if self.mode == "drop":
                raise ConnectionError("the stand-in dies mid-stream")  # uvicorn cuts the connection
            if self.mode == "slow":
                await asyncio.sleep(30)
            yield chunk({"content": " from the stand-in."})
            yield chunk({}, "stop")
            yield b"data: [DONE]\n\n"
        finally:
            self.streams_closed += 1

    async def ollama_chat(self, request: Request):
        return JSONResponse({"model": "upstream-name", "message": {"role": "assistant", "content": REPLY},
                             "done": True})
