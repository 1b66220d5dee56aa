"""Ollama's native API (/api/*), so Ollama clients work unchanged against this server.

Each request becomes one of our own requests (schemas.ChatCompletionRequest or
CompletionRequest) and runs as a jobs.Job on a lease from the host, exactly like the
OpenAI routes; only the wire differs: NDJSON lines instead of SSE, Ollama's field names,
errors as {"error": "message"}. Field shapes and defaults: ollama_wire.
"""

from __future__ import annotations

import asyncio
import os
import time

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from edge_infer.gguf.info import read_model_info
from edge_infer.host import ModelEntry, ModelNotLoadedError
from edge_infer.server import ollama_tools, ollama_wire as wire
from edge_infer.server.embeddings import run_leased
from edge_infer.server.errors import APIError, SafeJSONResponse
from edge_infer.server.faces import OLLAMA
from edge_infer.server.generation import generate
from edge_infer.server.jobs import Job
from edge_infer.server.keys import ADMIN
from edge_infer.server.leases import host_error, keep_alive_of
from edge_infer.server.ollama_stream import LineRenderer
from edge_infer.server.routing import guarded
from edge_infer.server.schemas import ChatCompletionRequest, CompletionRequest, parse, validate


class OllamaAPI:
    def __init__(self, srv):
        self.srv = srv
        self.host = srv.host
        self._infos: dict[tuple, object] = {}  # (path, size, mtime) -> ModelInfo

    # ---- names, models, leases ---------------------------------------------------------
    def name_of(self, model: str) -> str:
        """Ollama's 'name:latest' is our 'name' (its default tag); other tags are ours (QUANT)."""
        if model.endswith(":latest") and self.host.find(model) is None:
            return model[: -len(":latest")]
        return model

    def not_found(self, model: str) -> APIError:
        return host_error(ModelNotLoadedError(model, self.host.servable_names()))

    async def lease(self, request: Request, model: str, keep_alive):
        started = time.perf_counter()
        lease = await self.srv.lease(request, model, keep_alive)
        return lease, time.perf_counter() - started

    def info_of(self, path: str):
        try:
            st = os.stat(path)
            key = (path, st.st_size, st.st_mtime_ns)
            if key not in self._infos:
                if len(self._infos) > 256:
                    self._infos.clear()
                self._infos[key] = read_model_info(path)
            return self._infos[key]
        except Exception:  # unreadable or damaged: listed without details, refused when loaded
            return None

    def _find(self, model: str) -> tuple[ModelEntry, object] | None:
        """(entry, ModelInfo) of the local model `model` names, loaded or installed."""
        name = self.name_of(model)
        resident = self.host.find(name)
        for e in self.host.entries():
            if e.is_remote:
                continue
            if (resident is not None and e.name == resident.name) or e.name.lower() == name.lower():
                info = resident.engine.info if resident is not None else None
                return e, info or self.info_of(str(e.path))
        return None

    # ---- read-only routes --------------------------------------------------------------
    async def version(self, request: Request) -> Response:
        return SafeJSONResponse({"version": wire.OLLAMA_VERSION})

    async def tags(self, request: Request) -> Response:
        allowed = self.srv.may_name(request)  # a key sees the models it may name

        def build():
            out = []
            for e in filter(lambda e: allowed(e.name, e.is_remote), self.host.entries()):
                if e.is_remote:  # served elsewhere, as Ollama lists its cloud models
                    ups = [u["url"] for u in e.upstreams]
                    out.append({**wire.model_entry(e.name, "remote:" + ",".join(ups), 0, None),
                                "remote_model": e.remote_model, "remote_host": ups[0][:-3]})
                    continue
                info = self.info_of(str(e.path))
                size = e.size_bytes or (info.file_size if info is not None else 0)
                out.append(wire.model_entry(e.name, str(e.path), size, info))
            return out
        return SafeJSONResponse({"models": await asyncio.to_thread(build)})

    async def ps(self, request: Request) -> Response:
        out, allowed = [], self.srv.may_name(request)
        for e in self.host.entries(installed=False):  # the loaded ones: no reading of the store
            resident = self.host.find(e.name) if e.state == "loaded" and allowed(e.name) else None
            if resident is None:
                continue
            engine = resident.engine
            info = engine.info
            entry = wire.model_entry(e.name, str(e.path), e.memory.ram + e.memory.vram, info)
            # busy: its keep_alive counts from the end of its last request; None: until memory is needed
            expires = e.keep_alive if e.active else e.expires_in
            entry.update(size_vram=e.memory.vram, expires_at=wire.expires_at(expires),
                         context_length=engine.n_ctx_seq)
            out.append(entry)
        return SafeJSONResponse({"models": out})

    async def show(self, request: Request) -> Response:
        body = parse(wire.ShowBody, await self.srv.read_body(request))
        model = body.model or body.name
        if not model:
            raise APIError(400, "model is required", param="model")
        self.srv.check_model(request, self.name_of(model))
        found = await asyncio.to_thread(self._find, model)
        if found is None or found[1] is None:
            raise self.not_found(model)
        e, info = found
        return SafeJSONResponse(wire.show(info, str(e.path), body.verbose))

    # ---- generation --------------------------------------------------------------------
    async def generate(self, request: Request) -> Response:
        started = time.perf_counter()
        body = parse(wire.GenerateBody, await self.srv.read_body(request))
        wire.refuse_unsupported(body)
        out = wire.GenerateWire(body.model)
        if not body.prompt:
            return await self._load_only(request, body.model, body.keep_alive, out)
        if body.raw or body.suffix:  # suffix: fill in the middle, in the model's FIM tokens
            fields, schema = {"prompt": body.prompt, "suffix": body.suffix}, CompletionRequest
        else:
            system = [{"role": "system", "content": body.system}] if body.system else []
            fields, schema = {"messages": system + [{"role": "user", "content": body.prompt}]}, ChatCompletionRequest
        return await self._generate(request, body, schema, fields, out, started)

    async def chat(self, request: Request) -> Response:
        started = time.perf_counter()
        body = parse(wire.ChatBody, await self.srv.read_body(request))
        wire.refuse_unsupported(body)
        out = wire.ChatWire(body.model)
        if not body.messages:
            return await self._load_only(request, body.model, body.keep_alive, out)
        fields = {"messages": ollama_tools.chat_messages(body.messages), "tools": body.tools,
                  "tool_choice": body.tool_choice, "reasoning_format": "none" if body.think is False else "auto"}
        if body.think is False or body.think in ("low", "medium", "high"):  # thinking off, or its effort
            fields["reasoning_effort"] = "none" if body.think is False else body.think
        return await self._generate(request, body, ChatCompletionRequest, fields, out, started)

    async def _load_only(self, request: Request, model: str, keep_alive, out: wire.GenerateWire) -> Response:
        """No prompt: load the model (keep_alive 0: unload it, which takes an admin key), as Ollama does."""
        name = self.name_of(model)
        if keep_alive is not None and keep_alive_of(keep_alive) == 0:
            self.srv.authorize(request, ADMIN)
            self.srv.check_model(request, name)
            if self.host.find(name) is None:
                if not any(n.lower() == name.lower() for n in self.host.servable_names()):
                    raise self.not_found(model)
            else:
                await asyncio.to_thread(self.host.unload, name)  # now when idle, else after its last request
            return SafeJSONResponse(out.done("", "unload"))
        lease, _ = await self.lease(request, name, keep_alive)
        lease.release()
        return SafeJSONResponse(out.done("", "load"))

    async def _generate(self, request: Request, body, schema, fields: dict, out, started: float) -> Response:
        lease, load_s = await self.lease(request, self.name_of(body.model), body.keep_alive)
        try:
            try:  # the same checks and messages as the OpenAI routes, named as Ollama's fields
                ours = validate(schema, {**wire.openai_fields(body, lease.name), **fields})
            except APIError as exc:
                raise wire.ollama_param(exc) from None
            self._cap_context(lease.engine, ours, body, fields)
        except BaseException:
            lease.release()
            raise

        def counters(stats) -> dict:
            return wire.timings(stats, started, load_s)

        def whole(job: Job) -> Response:
            c = job.choices[0]
            reply = c.reply
            done = out.done(c.text, ollama_tools.done_reason(reply.finish_reason), counters(c.finish.stats))
            if isinstance(out, wire.ChatWire):  # content, thinking, tool_calls
                done["message"] = ollama_tools.message(reply)
            return SafeJSONResponse(done)

        return await generate(self.srv, request, lease, ours, renderer=lambda job: LineRenderer(out, counters),
                              whole=whole, plain=not isinstance(out, wire.ChatWire))

    def _cap_context(self, engine, ours, body, fields: dict) -> None:
        """options.num_ctx never reloads the model: it caps this request (prompt + output)
        within the context the model was loaded with."""
        num_ctx = body.options.num_ctx if body.options else None
        if not num_ctx or num_ctx >= engine.n_ctx_seq:
            return
        try:
            prompt = (engine.tokenize_messages(fields["messages"], ours.tools_for_prompt) if "messages" in fields
                      else engine.tokenize(fields["prompt"]))
        except Exception:
            return  # Job.submit reports the same problem with its own message
        room = num_ctx - len(prompt)
        if room < 1:
            raise APIError(400, f"the prompt is {len(prompt)} tokens; options.num_ctx {num_ctx} leaves no room "
                                f"to generate", param="options.num_ctx", code="context_length_exceeded")
        ours.max_tokens = min(ours.max_tokens or room, room)

    # ---- embeddings --------------------------------------------------------------------
    async def embed(self, request: Request) -> Response:
        started = time.perf_counter()
        body = parse(wire.EmbedBody, await self.srv.read_body(request))
        inputs = [body.input] if isinstance(body.input, str) else list(body.input)
        vectors, n, load_s = await self._embed(request, body.model, body.keep_alive, inputs, True, body.truncate,
                                               body.dimensions)
        return SafeJSONResponse({"model": body.model, "embeddings": vectors,
                                 "total_duration": wire.ns(time.perf_counter() - started),
                                 "load_duration": wire.ns(load_s), "prompt_eval_count": n})

    async def embeddings(self, request: Request) -> Response:
        """The legacy route: one prompt, one vector, not normalized (as Ollama answers it)."""
        body = parse(wire.EmbeddingsBody, await self.srv.read_body(request))
        inputs = [body.prompt] if body.prompt else []
        vectors, *_ = await self._embed(request, body.model, body.keep_alive, inputs, False, True)
        return SafeJSONResponse({"embedding": vectors[0] if vectors else []})

    async def _embed(self, request: Request, model: str, keep_alive, inputs: list[str], normalize: bool,
                     truncate: bool, dimensions: int | None = None):
        lease, load_s = await self.lease(request, self.name_of(model), keep_alive)
        if not inputs:  # Ollama loads the model and answers no vectors
            lease.release()
            return [], 0, load_s

        def embed(engine):
            return engine.embed(_truncated(engine, inputs) if truncate else inputs, normalize=normalize,
                                dimensions=dimensions)

        vectors, n = await run_leased(lease, embed, "input")
        return vectors, n, load_s

    # ---- routes ------------------------------------------------------------------------
    def routes(self, counted) -> list[Route]:
        def route(path: str, handler, method: str) -> Route:  # an unload also needs the admin scope: _load_only
            return Route(path, counted(path, guarded(self.srv, OLLAMA, handler), OLLAMA), methods=[method])

        # GET / and HEAD /: Ollama's liveness probe (its CLI and some UIs check it before
        # anything else); the same words, so such clients see a server. No key needed.
        alive = Route("/", counted("/", _alive), methods=["GET", "HEAD"])
        return [alive, route("/api/version", self.version, "GET"), route("/api/tags", self.tags, "GET"),
                route("/api/ps", self.ps, "GET"), route("/api/show", self.show, "POST"),
                route("/api/generate", self.generate, "POST"), route("/api/chat", self.chat, "POST"),
                route("/api/embed", self.embed, "POST"), route("/api/embeddings", self.embeddings, "POST")]


async def _alive(request: Request) -> Response:
    return Response("Ollama is running", media_type="text/plain")


def _truncated(engine, inputs: list[str]) -> list[str | list[int]]:
    """Ollama's truncate (its default): an input longer than an embedding input may be loses
    its end. Only inputs that could be too long are tokenized (a token is at least a byte)."""
    limit = engine.embedding_tokens
    out: list[str | list[int]] = []
    for text in inputs:
        tokens = engine.tokenize(text) if limit and len(text.encode("utf-8", "replace")) + 4 > limit else None
        out.append(tokens[:limit] if tokens is not None and len(tokens) > limit else text)
    return out


def ollama_routes(srv, counted) -> list[Route]:
    return OllamaAPI(srv).routes(counted)
