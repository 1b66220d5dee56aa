"""The faces' errors: each wire format has one error body, and a failure is answered in the
face of the route it came to, never chosen by its URL. OpenAI's {"error": {"message", "type",
"param", "code"}} (errors.APIError.body), Anthropic's {"type": "error", "error": {"type",
"message"}} (anthropic_wire), Ollama's {"error": "message"} (ollama_wire).

A Face answers with its body as a JSON response (the route wrappers: server.routing) or as
the chunk that ends a stream (an SSE `error` event, an NDJSON line): the stream driver
(server.generation) and the remote proxy end streams that way."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Callable

from starlette.responses import Response

from edge_infer.server import anthropic_wire, ollama_wire
from edge_infer.server.errors import APIError, SafeJSONResponse
from edge_infer.server.ndjson import NDJSONResponse, line
from edge_infer.server.openai_wire import sse
from edge_infer.server.sse import SSEResponse


def error_event(body: dict) -> bytes:
    return sse(body, event="error")


def relayed_line(body: dict) -> bytes:
    """The proxy's own line in an Ollama stream it relays: json.dumps' defaults (", ", ": ",
    ASCII escapes), as it has always written it (kept byte for byte; `line` is compact)."""
    return (json.dumps(body) + "\n").encode()


@dataclass(frozen=True)
class Face:
    name: str
    error_body: Callable[[APIError], dict]
    frame: Callable[[dict], bytes]  # an object as one chunk of this face's streams
    streams: type[SSEResponse] = SSEResponse  # the response its streams go out in
    relay_frame: Callable[[dict], bytes] | None = None  # the remote proxy's chunks, when not `frame`

    def error_response(self, exc: APIError) -> Response:
        return SafeJSONResponse(self.error_body(exc), status_code=exc.status, headers=exc.headers)

    def stream_error(self, exc: APIError) -> bytes:
        """The chunk that ends one of this face's streams with `exc`."""
        return self.frame(self.error_body(exc))

    def relay_error(self, exc: APIError) -> bytes:
        """The chunk that ends a stream relayed from a remote model with `exc`."""
        return (self.relay_frame or self.frame)(self.error_body(exc))


OPENAI = Face("openai", APIError.body, error_event)  # also the Responses API's, /infill's, llama-server's
ANTHROPIC = Face("anthropic", anthropic_wire.error_body, error_event)
OLLAMA = Face("ollama", ollama_wire.error_body, line, NDJSONResponse, relayed_line)
