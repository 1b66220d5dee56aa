"""NDJSON streaming (Ollama's wire): one JSON object per line, the streamed form of a Job."""

from __future__ import annotations

import json
from typing import AsyncIterator

from edge_infer.engine import TokenEvent
from edge_infer.server.jobs import Job, generation_error
from edge_infer.server.sse import SSEResponse


class NDJSONResponse(SSEResponse):
    """One JSON object per line; a client leaving cancels the generation (SSEResponse)."""
    media_type = "application/x-ndjson"


def line(obj: dict) -> bytes:
    return (json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8", "backslashreplace")


class PlainPieces:
    """Token text -> the route's piece object, as it comes."""

    def __init__(self, out):
        self.out = out

    def feed(self, text: str, call_began: bool = False) -> dict | None:
        return self.out.piece(text) if text else None

    def finish(self, text: str) -> dict | None:
        return self.feed(text)


async def stream_lines(job: Job, out, counters, pieces=None) -> AsyncIterator[bytes]:
    """A piece per token (`pieces`: how text becomes one; plain text by default), then the
    `done` object with the counters; a failure is an {"error"} line (the ollama client
    raises it) and the stream ends there."""
    pieces = pieces or PlainPieces(out)
    try:
        async for _, ev in job.events():
            if isinstance(ev, TokenEvent):
                if (ev.text or ev.call_began) and (obj := pieces.feed(ev.text, ev.call_began)) is not None:
                    yield line(obj)
                continue
            err = generation_error(ev)
            if err is not None:
                yield line({"error": err.message})
                return
            if (obj := pieces.finish(ev.text)) is not None:
                yield line(obj)
            yield line(out.done("", ev.reason, counters(ev.stats)))
    except Exception as exc:  # a bug of ours: still end with a line clients understand
        yield line({"error": f"internal error: {exc}"})
    finally:
        job.cancel()
