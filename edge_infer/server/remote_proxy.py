"""Requests for a remote model (edge_infer.remote), forwarded as they came: the same route
on the chosen upstream, the body with `model` set to the name there, the answer relayed as
it arrives (the remote's own chunks, usage and errors).

A request goes to the upstream with the fewest outstanding requests; one that cannot be
reached, or answers 502/503/504 before any byte, is taken out and the next one is tried.
A stream the remote drops mid-way ends with an error in the route's face (server.faces)
(never a hang), and a remote slower than the model's timeout is cut off the same way."""

from __future__ import annotations

import asyncio
import json
import time

import httpx
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from edge_infer.remote import RemoteModel, RemoteModels, Upstream
from edge_infer.remote.registry import headers_for
from edge_infer.server.errors import APIError
from edge_infer.server.faces import Face
from edge_infer.server.sse import SSEResponse

CONNECT_TIMEOUT = 5.0
RETRYABLE = {502, 503, 504}  # a gateway without its server, or a server refusing work
STREAMS = ("text/event-stream", "application/x-ndjson")
_closing: set = set()


def model_in(body: bytes) -> str | None:
    """The `model` a JSON body names (None for anything else: the route's own parser says why)."""
    if b'"model"' not in body:
        return None
    try:
        data = json.loads(body)
    except ValueError:
        return None
    model = data.get("model") if isinstance(data, dict) else None
    return model if isinstance(model, str) else None


def renamed(body: bytes, name: str) -> bytes:
    data = json.loads(body)
    data["model"] = name
    return json.dumps(data, ensure_ascii=False).encode("utf-8", "backslashreplace")


class RelayedStream(SSEResponse):
    """The remote's stream as it arrives; a client leaving closes the upstream request
    (the remote then cancels its generation)."""

    def __init__(self, content, status: int, media_type: str, on_close):
        StreamingResponse.__init__(self, content, status_code=status, media_type=media_type,
                                   headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
        self._on_close = on_close


class RemoteProxy:
    def __init__(self, remotes: RemoteModels):
        self.remotes = remotes
        self.client = httpx.AsyncClient(limits=httpx.Limits(max_connections=512, max_keepalive_connections=64),
                                        headers={"accept-encoding": "identity"})

    async def forward(self, model: RemoteModel, path: str, request: Request, body: bytes, face: Face) -> Response:
        payload = renamed(body, model.remote_model)
        headers = {"content-type": "application/json", "accept": request.headers.get("accept", "*/*"),
                   **headers_for(model)}
        if version := request.headers.get("anthropic-version"):
            headers["anthropic-version"] = version
        deadline = time.monotonic() + model.timeout
        tried, order = [], model.candidates()
        for i, u in enumerate(order):
            since = model.started(u)
            try:
                upstream = await self._send(model, u, path, payload, headers, deadline)
            except asyncio.TimeoutError:
                model.finished(u, since, f"no answer within {model.timeout:g} s")
                raise APIError(504, f"remote model {model.name}: {u.url} did not answer within "
                                    f"{model.timeout:g} s", code="remote_timeout") from None
            except httpx.HTTPError as exc:
                reason = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
                model.finished(u, since, reason)
                tried.append(f"{u.url} ({reason})")
                continue
            if upstream.status_code in RETRYABLE and i < len(order) - 1:
                await upstream.aclose()
                model.finished(u, since, f"answered {upstream.status_code}")
                tried.append(f"{u.url} (answered {upstream.status_code})")
                continue
            return await self._relay(model, u, since, upstream, face, deadline)
        raise APIError(503, f"no server of remote model {model.name} answered: {'; '.join(tried)}",
                       code="remote_unavailable", headers={"Retry-After": "5"})

    async def _send(self, model, u: Upstream, path, payload, headers, deadline) -> httpx.Response:
        timeout = httpx.Timeout(model.timeout, connect=min(CONNECT_TIMEOUT, model.timeout))
        request = self.client.build_request("POST", u.url_for(path), content=payload, headers=headers,
                                            timeout=timeout)
        return await asyncio.wait_for(self.client.send(request, stream=True), deadline - time.monotonic())

    async def _relay(self, model: RemoteModel, u: Upstream, since: float, upstream: httpx.Response, face: Face,
                     deadline: float) -> Response:
        media = upstream.headers.get("content-type", "application/json")
        failed = f"answered {upstream.status_code}" if upstream.status_code >= 500 else None
        if not media.startswith(STREAMS):
            try:
                content = await asyncio.wait_for(upstream.aread(), deadline - time.monotonic())
            except (httpx.HTTPError, asyncio.TimeoutError) as exc:
                why = (f"no answer within {model.timeout:g} s" if isinstance(exc, asyncio.TimeoutError)
                       else f"dropped the connection ({type(exc).__name__})")
                model.finished(u, since, why)
                raise APIError(502, f"remote model {model.name}: {u.url} {why}", code="remote_error") from None
            finally:
                await upstream.aclose()
            model.finished(u, since, failed)
            return Response(content, status_code=upstream.status_code, media_type=media)
        outcome = {"error": failed}

        async def relay():
            try:
                chunks = upstream.aiter_raw()
                while True:
                    left = deadline - time.monotonic()
                    try:
                        chunk = await asyncio.wait_for(chunks.__anext__(), max(left, 0.001))
                    except StopAsyncIteration:
                        return
                    yield chunk
            except asyncio.TimeoutError:
                outcome["error"] = f"no end of the stream within {model.timeout:g} s"
            except httpx.HTTPError as exc:
                outcome["error"] = f"dropped the stream ({type(exc).__name__})"
            message = f"remote model {model.name}: {u.url} {outcome['error']}"
            yield face.relay_error(APIError(502, message, code="remote_error"))  # in the route's face

        def closed():
            model.finished(u, since, outcome["error"])
            task = asyncio.get_running_loop().create_task(upstream.aclose())
            _closing.add(task)  # held until done (the loop keeps only weak references)
            task.add_done_callback(_closing.discard)

        return RelayedStream(relay(), upstream.status_code, media, closed)

    async def aclose(self) -> None:
        await self.client.aclose()


def remote_aware(srv, path: str, handler, face: Face):
    """`handler` for local models; a POST whose JSON body names a remote model is forwarded
    (a stream it drops ends with an error in `face`, the route's)."""
    async def route(request: Request) -> Response:
        if not srv.remotes or request.method != "POST":
            return await handler(request)
        srv.authorize(request)
        body = await srv.read_body(request)
        request._body = body  # the handler reads it again (Request.stream() serves _body)
        model = srv.remotes.find(model_in(body))
        if model is None:
            return await handler(request)
        srv.check_model(request, model.name, remote=True)  # the user's upstream key: only keys that name it
        return await srv.remote_proxy.forward(model, path, request, body, face)
    return route

