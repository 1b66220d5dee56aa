"""The OpenAI-compatible app over a model host: routes, auth, body limits, streaming.

Each request leases the engine serving its `model` (none named: the default) from the
host, which loads an installed model on demand (server.leases); the lease ends with the
response, so a model is never unloaded under a live request.

Starlette rather than FastAPI: bodies are parsed by schemas.parse so every validation
error is OpenAI-shaped (FastAPI would answer 422 in its own shape), and streaming is a
plain ASGI response. Engine.submit is quick, so handlers call it on the event loop.
"""

from __future__ import annotations

import asyncio
import functools
import time
import weakref
from dataclasses import asdict

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from edge_infer.host import ModelEntry, ModelHost, ModelNotLoadedError
from edge_infer.server import embeddings
from edge_infer.server.door import LOOPBACK_ORIGIN, Door
from edge_infer.server.keys import ADMIN, INFERENCE, Key, Keyring, authorize, model_refusal
from edge_infer.server.anthropic import anthropic_routes
from edge_infer.server.leases import Leases, keep_alive_of
from edge_infer.server.errors import APIError, SafeJSONResponse
from edge_infer.server.http_limits import HeaderLimit
from edge_infer.server.infill import infill_routes
from edge_infer.server.generation import generate
from edge_infer.server.jobs import Job
from edge_infer.server.metrics import Metrics
from edge_infer.server.ollama import ollama_routes
from edge_infer.server.openai_responses import ResponsesAPI
from edge_infer.server.response_store import ResponseStore
from edge_infer.server.openai_stream import ChunkRenderer
from edge_infer.server.openai_wire import ChatWire, TextWire, TokenText, usage
from edge_infer.server.remote_proxy import RemoteProxy
from edge_infer.server.routing import counted as counted_route
from edge_infer.server.schemas import ChatCompletionRequest, CompletionRequest, parse
from edge_infer.server.tokens import token_routes

MAX_BODY = 8 << 20  # 8 MiB: a prompt larger than any context we can hold, with room
BODY_TIMEOUT = 30.0  # seconds to receive a whole body once the headers are in


class Server:
    def __init__(self, host: ModelHost, api_key: str | None = None, max_body: int = MAX_BODY,
                 body_timeout: float = BODY_TIMEOUT, keys: Keyring | None = None):
        self.host = host
        self.keys = keys if keys is not None else Keyring.load(api_key=api_key)  # None: no key wanted
        self.max_body = max_body
        self.body_timeout = body_timeout
        self.created = int(time.time())
        self.response_store = ResponseStore()  # the Responses API's stored responses (server.openai_responses)
        self.metrics = Metrics(host, self.response_store)
        self.leases = Leases(host)
        self.remotes = host.remotes  # models served elsewhere: forwarded (server.remote_proxy)
        self.remote_proxy = RemoteProxy(self.remotes) if self.remotes else None
        self._texts: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # engine -> TokenText

    # ---- plumbing ---------------------------------------------------------------------
    def authorize(self, request: Request, scope: str = INFERENCE) -> Key | None:
        """The request's key if it may use `scope` (server.keys); 401/403 otherwise."""
        return authorize(self.keys, request, scope)

    def may_name(self, request: Request):
        """(name, remote) -> whether the request's key may name that model: for listings."""
        key = self.authorize(request)
        return (lambda name, remote=False: True) if key is None else key.allows_model

    def check_model(self, request: Request, model: str, remote: bool = False) -> None:
        """403 unless the request's key may name `model` (or the loaded model it is an alias of)."""
        key = self.authorize(request)
        if key is None or key.allows_model(model, remote):
            return
        loaded = None if remote else self.host.find(model)
        if loaded is None or not key.allows_model(loaded.name):
            raise model_refusal(key, model, remote)

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

    def engine_for(self, model: str | None):
        """The loaded engine serving `model` (None: the default one), or a 404 naming what is
        loaded. For read-only routes (stats, props): they never load a model."""
        try:
            return self.host.get(model)
        except ModelNotLoadedError as exc:
            raise APIError(404, str(exc), param="model", code="model_not_found") from None

    async def lease(self, request: Request, model: str | None, keep_alive=None):
        """A lease on the engine serving `model`, loading it if needed, when the request's key
        may name it (checked before loading); release() it when the response is over."""
        if model is not None:
            self.check_model(request, model)
        lease = await self.leases.acquire(model, keep_alive_of(keep_alive))
        if model is None:  # the default model: known by name only now
            try:
                self.check_model(request, lease.name)
            except APIError:
                lease.release()
                raise
        return lease

    def text_of(self, engine) -> TokenText:
        text = self._texts.get(engine)
        if text is None:
            text = self._texts[engine] = TokenText(engine.model.piece)
        return text

    # ---- routes -----------------------------------------------------------------------
    async def health(self, request: Request) -> Response:
        entries = self.host.entries(installed=False)  # the loaded and the remote models: no store read
        remotes = {e.name: {"healthy": e.healthy, "upstreams": len(e.upstreams),
                            "status": "ok" if e.healthy else "degraded"} for e in entries if e.is_remote}
        extra = {"remotes": remotes} if remotes else {}
        failed = dict(self.host.failures)  # models whose engine process ended (a worker lost)
        failed.update({e.name: e.failure for e in entries if not e.is_remote and e.state == "unavailable"})
        if failed:
            extra["unavailable"] = failed
        loaded = self.host.current or next(iter(self.host.loaded()), None)
        if loaded is None:
            if self.host.on_demand and self.host.servable_names():  # loads on the first request
                return SafeJSONResponse({"status": "degraded" if failed else "ok", "model": None, "loaded": [], **extra})
            if any(r["healthy"] for r in remotes.values()):
                return SafeJSONResponse({"status": "ok", "model": None, "loaded": [], **extra})
            return SafeJSONResponse({"status": "no model", "model": None, **extra}, status_code=503)
        engine = loaded.engine
        snap = engine.snapshot()
        state = engine.state
        status = {"ok": "degraded" if failed else "ok", "stalled": "stalled", "failed": "degraded"}.get(state, "error")
        body = {"status": status, "model": loaded.name,
                "slots": snap.n_slots, "slots_busy": snap.slots_busy, "queued": snap.queued,
                "loaded": self.host.names(), **extra}
        if state != "ok":
            body["engine"] = state
        return SafeJSONResponse(body, status_code=200 if state == "ok" else 503)

    async def models(self, request: Request) -> Response:
        allowed = self.may_name(request)
        cards = [self._model_card(e) for e in self.host.entries() if allowed(e.name, e.is_remote)]
        return SafeJSONResponse({"object": "list", "data": cards})

    async def model_card(self, request: Request) -> Response:
        name = request.path_params["model"]
        remote = self.remotes.find(name)
        self.check_model(request, remote.name if remote is not None else name, remote=remote is not None)
        if remote is not None:
            wanted = remote.name
        else:
            loaded = self.host.find(name)  # a loaded model answers to its aliases too
            wanted = loaded.name if loaded is not None else name
        for e in self.host.entries(installed=remote is None):
            if e.name == wanted and e.is_remote == (remote is not None):
                return SafeJSONResponse(self._model_card(e))
        raise APIError(404, str(ModelNotLoadedError(name, self.host.servable_names())), param="model",
                       code="model_not_found")

    def _model_card(self, e: ModelEntry) -> dict:
        """OpenAI's model object, plus where it stands here (llama-server's router adds
        `status` the same way) and what it holds in memory; a remote one, where it is served."""
        if e.is_remote:
            return {"id": e.name, "object": "model", "created": self.created, "owned_by": "remote",
                    "status": {"value": "remote", "healthy": e.healthy, "active_requests": e.active},
                    "remote": {"model": e.remote_model, "upstreams": list(e.upstreams)}}
        card = {"id": e.name, "object": "model", "created": self.created, "owned_by": "edge-infer",
                "status": {"value": e.state}}
        if e.memory is not None:
            card["memory"] = {"ram_bytes": e.memory.ram, "vram_bytes": e.memory.vram}
            card["status"].update(active_requests=e.active, pinned=e.pinned,
                                  idle_seconds=e.idle_seconds, expires_in=e.expires_in)
        else:  # installed: unloaded, or unavailable since its engine failed
            card["size_bytes"] = e.size_bytes
        return card

    async def stats(self, request: Request) -> Response:
        self.authorize(request, ADMIN)
        return SafeJSONResponse(self.engine_for(request.query_params.get("model")).snapshot().to_dict())

    async def props(self, request: Request) -> Response:
        """What this server runs on (llama-server's /props): model, settings, CPU backend, and
        where the model's layers and bytes are (per device, llama.cpp's buffers and the plan)."""
        self.authorize(request, ADMIN)
        engine = self.engine_for(request.query_params.get("model"))
        snap = engine.snapshot()
        return SafeJSONResponse({"model": engine.name, "settings": engine.settings.__dict__,
                                 "backend": engine.backend.as_dict() if engine.backend is not None else None,
                                 "n_gpu_layers": engine.placement.n_gpu_layers,
                                 "prompt_cache": {  # the caps in use (the settings may say auto)
                                     "ram_cap_bytes": snap.prompt_cache_cap_bytes,
                                     "disk_cap_bytes": snap.disk_cache_cap_bytes,
                                     "disk_folder": snap.disk_cache_folder,
                                     "disk_off_reason": snap.disk_cache_off_reason},
                                 "devices": [asdict(d) for d in snap.devices]})

    async def prometheus(self, request: Request) -> Response:
        self.authorize(request, ADMIN)
        return Response(self.metrics.render(), media_type="text/plain; version=0.0.4; charset=utf-8")

    async def chat(self, request: Request) -> Response:
        return await self._complete(request, ChatCompletionRequest, ChatWire)

    async def completions(self, request: Request) -> Response:
        return await self._complete(request, CompletionRequest, TextWire)

    async def _complete(self, request: Request, schema, wire_cls) -> Response:
        self.authorize(request, INFERENCE)
        body = parse(schema, await self.read_body(request))
        lease = await self.lease(request, body.model, body.keep_alive)
        engine = lease.engine
        text_of, wire = self.text_of(engine), wire_cls(engine.name, include_usage=body.stream and body.include_usage)
        wants_echo = isinstance(body, CompletionRequest) and body.echo
        echo = (lambda job: self._echo(engine, job)) if wants_echo else (lambda job: None)

        def whole(job: Job) -> Response:
            choices, lines = [], echo(job)
            for c in job.choices:
                start = len(lines[c.index]) if lines else 0
                lps = wire.logprob_entries(c.logprobs, job.top_logprobs, text_of, start) if job.logprobs else None
                choices.append(wire.whole(c.index, c.reply, lps, lines[c.index] if lines else ""))
            return SafeJSONResponse(wire.response(choices, usage(*job.usage())))

        return await generate(self, request, lease, body, whole=whole,
                              renderer=lambda job: ChunkRenderer(job, wire, text_of, echo(job)))

    def _echo(self, engine, job: Job) -> list[str]:
        return [c.prompt if isinstance(c.prompt, str) else engine.model.detokenize(c.prompt)
                for c in job.choices]


def create_app(host: ModelHost, api_key: str | None = None, max_body: int = MAX_BODY,
               body_timeout: float = BODY_TIMEOUT, cors_origins: list[str] | tuple[str, ...] = (),
               allowed_hosts: list[str] | tuple[str, ...] = (), keys: Keyring | None = None) -> Starlette:
    """keys: the server's Keyring (serve --api-keys-file); without it, api_key is the one key."""
    srv = Server(host, api_key=api_key, max_body=max_body, body_timeout=body_timeout, keys=keys)
    cors_origins = [o.rstrip("/") for o in cors_origins]
    counted = functools.partial(counted_route, srv)  # (endpoint, handler, face): server.routing

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
        Route("/v1/embeddings", counted("/v1/embeddings", functools.partial(embeddings.embeddings, srv)),
              methods=["POST"]),
        Route("/v1/rerank", counted("/v1/rerank", functools.partial(embeddings.rerank, srv)), methods=["POST"]),
        Route("/v1/reranking", counted("/v1/rerank", functools.partial(embeddings.rerank, srv)), methods=["POST"]),
    ]
    routes += ollama_routes(srv, counted)  # Ollama's native /api/* (server.ollama)
    routes += anthropic_routes(srv, counted)  # Anthropic's /v1/messages (server.anthropic)
    routes += token_routes(srv, counted)  # llama-server's /tokenize, /detokenize, /apply-template
    routes += infill_routes(srv, counted)  # llama-server's /infill (editor autocomplete)
    routes += ResponsesAPI(srv, srv.response_store).routes(counted)  # OpenAI's /v1/responses
    app = Starlette(routes=bare_twins(routes), exception_handlers={HTTPException: http_error, Exception: server_error},
                    middleware=[Middleware(Door, allowed_hosts=allowed_hosts, cors_origins=cors_origins),
                                *cors(cors_origins), Middleware(HeaderLimit)])
    app.state.server = srv
    srv.remotes.start()  # their health checks
    return app


def bare_twins(routes: list[Route]) -> list[Route]:
    """Every /v1/X also as /X: llama-server answers both, and clients given a bare base URL
    (http://host:port) call /chat/completions, /models, /embeddings."""
    taken = {r.path for r in routes}
    return routes + [Route(r.path[3:], r.endpoint, methods=sorted(r.methods - {"HEAD"}))
                     for r in routes if r.path.startswith("/v1/") and r.path[3:] not in taken]


def cors(origins) -> list[Middleware]:
    """Browser clients (web chat UIs) on loopback origins and the listed ones (the Door refuses
    any other Origin). Starlette's middleware answers preflights (OPTIONS) before auth, as
    browsers send no key there."""
    return [Middleware(CORSMiddleware, allow_origins=list(origins), allow_origin_regex=LOOPBACK_ORIGIN,
                       allow_methods=["GET", "POST", "DELETE", "OPTIONS"], allow_headers=["*"],
                       expose_headers=["Retry-After"], max_age=600)]
