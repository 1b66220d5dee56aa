"""How a handler becomes a route: a request naming a remote model is forwarded
(server.remote_proxy), a failure is answered in the route's face (server.faces), and every
request is counted (metrics) and logged."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from edge_infer.server.door import access_log
from edge_infer.server.errors import APIError
from edge_infer.server.faces import OPENAI, Face
from edge_infer.server.keys import key_name
from edge_infer.server.remote_proxy import remote_aware


def counted(srv, endpoint: str, handler, face: Face = OPENAI):
    """`handler` as the route of `endpoint` (its name in metrics), answering in `face`."""
    handler = remote_aware(srv, endpoint, handler, face)  # a request naming a remote model goes there

    async def route(request: Request) -> Response:
        try:
            response = await handler(request)
        except APIError as exc:  # in the face's own format (the remote path's key check, body limits)
            response = face.error_response(exc)
        name = key_name(request.scope) or "-"
        srv.metrics.request(endpoint, response.status_code, name if srv.keys is not None else None)
        access_log.info("%s %s %d key=%s", request.method, request.url.path, response.status_code, name)
        return response
    return route


def guarded(srv, face: Face, handler):
    """The API key check, and every failure (a bug of ours too) as the face's error body with
    the status our APIError carries: Ollama's and Anthropic's clients read only their own."""
    async def route(request: Request) -> Response:
        try:
            srv.authorize(request)
            return await handler(request)
        except APIError as exc:
            return face.error_response(exc)
        except Exception as exc:
            return face.error_response(APIError(500, f"internal error: {exc}"))
    return route
