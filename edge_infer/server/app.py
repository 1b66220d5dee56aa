"""The OpenAI-compatible app on one engine: routes, auth, body limits, streaming.

Starlette rather than FastAPI: bodies are parsed by schemas.parse so every validation
error is OpenAI-shaped (FastAPI would answer 422 in its own shape), and streaming is a
plain ASGI response. Engine.submit is quick, so handlers call it on the event loop.
"""

from __future__ import annotations

import asyncio
import hmac
import time

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from edge_infer.server.errors import APIError, SafeJSONResponse
from edge_infer.server.http_limits import HeaderLimit
from edge_infer.server.jobs import Job
from edge_infer.server.metrics import Metrics
from edge_infer.server.responses import ChatWire, TextWire, TokenText, usage
from edge_infer.server.schemas import ChatCompletionRequest, CompletionRequest, parse
from edge_infer.server.sse import SSEResponse, stream_job

MAX_BODY = 8 << 20  # 8 MiB: a prompt larger than any context we can hold, with room
BODY_TIMEOUT = 30.0  # seconds to receive a whole body once the headers are in


class Server:
    def __init__(self, engine, api_key: str | None = None, max_body: int = MAX_BODY,
                 model_ids: tuple[str, ...] = (), body_timeout: float = BODY_TIMEOUT):
        self.engine = engine
        self.api_key = api_key
        self.max_body = max_body
        self.body_timeout = body_timeout
        self.model = engine.name
        # The name it is served as, plus whatever else clearly means the same file.
        self.model_ids = {engine.name, engine.model.path.stem, engine.model.path.name, *model_ids}
        self.created = int(time.time())
        self.metrics = Metrics(engine)
        self.text_of = TokenText(engine.model.piece)

    # ---- plumbing ---------------------------------------------------------------------
    def check_key(self, request: Request) -> None:
        if self.api_key is None:
            return
        auth = request.headers.get("authorization", "")
        scheme, _, key = auth.partition(" ")
        if scheme.lower() != "bearer" or not key.strip():
            raise APIError(401, "missing API key: send 'Authorization: Bearer KEY'", code="missing_api_key",
                           headers={"WWW-Authenticate": "Bearer"})
        if not hmac.compare_digest(key.strip().encode(), self.api_key.encode()):
            raise APIError(401, "incorrect API key provided", code="invalid_api_key",
                           headers={"WWW-Authenticate": "Bearer"})

    async def read_body(self, request: Request) -> bytes:
        too_big = APIError(413, f"the request body is larger than {self.max_body} bytes",
                           code="request_too_large")
        length = request.headers.get("content-length")
        if length and length.isdigit() and int(length) > self.max_body:
            raise too_big  # refused before reading a byte of it
        body = bytearray()

        async def read():
            async for chunk in request.stream():  # no Content-Length (chunked): count as we go
                body.extend(chunk)
                if len(body) > self.max_body:
                    raise too_big

        try:  # a body that trickles in (slowloris) must not hold the connection forever
            await asyncio.wait_for(read(), self.body_timeout)
        except asyncio.TimeoutError:
            raise APIError(408, f"the request body did not arrive within {self.body_timeout:g} s",
                           code="request_timeout", headers={"Connection": "close"}) from None
        return bytes(body)

    def check_model(self, model: str | None) -> None:
        if model is not None and model not in self.model_ids:
            shown = model if len(model) <= 200 else model[:200] + "…"  # never echo megabytes back
            raise APIError(404, f"the model '{shown}' does not exist; this server serves '{self.model}'",
                           param="model", code="model_not_found")

    # ---- routes -----------------------------------------------------------------------
    async def health(self, request: Request) -> Response:
        snap = self.engine.snapshot()
        state = getattr(self.engine, "state", "ok")
        body = {"status": {"ok": "ok", "stalled": "stalled"}.get(state, "error"), "model": self.model,
                "slots": snap.n_slots, "slots_busy": snap.slots_busy, "queued": snap.queued}
        if state != "ok":
            body["engine"] = state
        return SafeJSONResponse(body, status_code=200 if state == "ok" else 503)

    async def models(self, request: Request) -> Response:
        self.check_key(request)
        return SafeJSONResponse({"object": "list", "data": [self._model_card()]})

    async def model_card(self, request: Request) -> Response:
        self.check_key(request)
        self.check_model(request.path_params["model"])
        return SafeJSONResponse(self._model_card())

    def _model_card(self) -> dict:
        return {"id": self.model, "object": "model", "created": self.created, "owned_by": "edge-infer"}

    async def stats(self, request: Request) -> Response:
        self.check_key(request)
        return SafeJSONResponse(self.engine.snapshot().to_dict())

    async def props(self, request: Request) -> Response:
        """What this server runs on (llama-server's /props): model, settings, CPU backend."""
        self.check_key(request)
        backend = getattr(self.engine, "backend", None)
        settings = getattr(self.engine, "settings", None)
        return SafeJSONResponse({"model": self.model,
                             "settings": settings.__dict__ if settings is not None else None,
                             "backend": backend.as_dict() if backend is not None else None})

    async def prometheus(self, request: Request) -> Response:
        self.check_key(request)
        return Response(self.metrics.render(), media_type="text/plain; version=0.0.4; charset=utf-8")

    async def chat(self, request: Request) -> Response:
        return await self._complete(request, ChatCompletionRequest, ChatWire)

    async def completions(self, request: Request) -> Response:
        return await self._complete(request, CompletionRequest, TextWire)

    async def _complete(self, request: Request, schema, wire_cls) -> Response:
        self.check_key(request)
        body = parse(schema, await self.read_body(request))
        self.check_model(body.model)
        job = Job(self.engine, body)
        job.on_finish = lambda ev: ev.stats and self.metrics.generation(ev.stats, ev.reason)
        job.submit()
        wire = wire_cls(self.model, include_usage=body.stream and body.include_usage)
        echo = self._echo(job) if getattr(body, "echo", False) else None
        if body.stream:
            return SSEResponse(stream_job(job, wire, self.text_of, echo), on_close=lambda: self._closed(job))
        if not await self._until_done_or_gone(request, job):
            return Response(status_code=499)  # nobody is listening; uvicorn drops it
        k = job.top_logprobs
        choices = []
        for c in job.choices:
            start = len(echo[c.index]) if echo else 0
            lps = wire.logprob_entries(c.logprobs, k, self.text_of, start) if job.logprobs else None
            text = (echo[c.index] if echo else "") + c.text
            choices.append(wire.whole(c.index, text, c.finish.reason, lps))
        return SafeJSONResponse(wire.response(choices, usage(*job.usage())))

    async def _until_done_or_gone(self, request: Request, job: Job) -> bool:
        """Collect the whole completion unless the client disconnects first (then cancel)."""
        async def gone():
            while (await request.receive())["type"] != "http.disconnect":
                pass

        work, watch = asyncio.ensure_future(job.collect()), asyncio.ensure_future(gone())
        try:
            await asyncio.wait({work, watch}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            watch.cancel()
            if not work.done():
                work.cancel()
                job.cancel()
                self._closed(job)
        if work.done() and not work.cancelled():
            work.result()  # re-raises a generation failure as its APIError
            return True
        return False

    def _closed(self, job: Job) -> None:
        if not job.done:
            self.metrics.cancelled.inc()

    def _echo(self, job: Job) -> list[str]:
        return [c.prompt if isinstance(c.prompt, str) else self.engine.model.detokenize(c.prompt)
                for c in job.choices]


def create_app(engine, api_key: str | None = None, max_body: int = MAX_BODY,
               body_timeout: float = BODY_TIMEOUT) -> Starlette:
    srv = Server(engine, api_key=api_key, max_body=max_body, body_timeout=body_timeout)
    metrics = srv.metrics

    def counted(endpoint: str, handler):
        async def route(request: Request) -> Response:
            try:
                response = await handler(request)
            except APIError as exc:
                response = exc.response()
            metrics.request(endpoint, response.status_code)
            return response
        return route

    async def http_error(request: Request, exc: HTTPException) -> Response:
        return APIError(exc.status_code, f"{request.method} {request.url.path}: {exc.detail}").response()

    async def server_error(request: Request, exc: Exception) -> Response:
        return APIError(500, f"internal error: {exc}").response()

    routes = [
        Route("/health", counted("/health", srv.health), methods=["GET"]),
        Route("/metrics", counted("/metrics", srv.prometheus), methods=["GET"]),
        Route("/v1/models", counted("/v1/models", srv.models), methods=["GET"]),
        Route("/v1/models/{model:path}", counted("/v1/models", srv.model_card), methods=["GET"]),
        Route("/v1/stats", counted("/v1/stats", srv.stats), methods=["GET"]),
        Route("/props", counted("/props", srv.props), methods=["GET"]),
        Route("/v1/props", counted("/props", srv.props), methods=["GET"]),
        Route("/v1/chat/completions", counted("/v1/chat/completions", srv.chat), methods=["POST"]),
        Route("/v1/completions", counted("/v1/completions", srv.completions), methods=["POST"]),
    ]
    app = Starlette(routes=routes, exception_handlers={HTTPException: http_error, Exception: server_error},
                    middleware=[Middleware(HeaderLimit)])
    app.state.server = srv
    return app
