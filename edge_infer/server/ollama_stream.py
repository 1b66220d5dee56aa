"""Ollama's streamed generate and chat: a Job's reply events as NDJSON lines, driven by
generation.stream (the response: faces.OLLAMA's NDJSONResponse)."""

from __future__ import annotations

from typing import Callable

from edge_infer.server.faces import OLLAMA
from edge_infer.server.generation import Renderer
from edge_infer.server.ndjson import line
from edge_infer.server.ollama_tools import done_reason, piece


class LineRenderer(Renderer):
    """A line per token's reply events (content, thinking, whole tool calls), then the `done`
    object with the counters; a failure is an {"error"} line (the ollama client raises it)
    and the stream ends there."""
    face = OLLAMA

    def __init__(self, out, counters: Callable[[object], dict]):
        self.out, self.counters = out, counters  # out: ollama_wire's GenerateWire or ChatWire

    def token(self, i, tok, events):
        if (obj := piece(self.out, events)) is not None:
            yield line(obj)

    def end(self, i, end):
        yield line(self.out.done("", done_reason(end.finish_reason), self.counters(end.stats)))

    def failed(self, i, events, err):
        yield self.face.stream_error(err)  # what the end released is not sent: Ollama's lines always were so
