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


async def stream_lines(job: Job, out, counters) -> AsyncIterator[bytes]:
    """A piece per token, then the `done` object with the counters; a failure is an
    {"error"} line (the ollama client raises it) and the stream ends there."""
    try:
        async for _, ev in job.events():
            if isinstance(ev, TokenEvent):
                if ev.text:
                    yield line(out.piece(ev.text))
                continue
            err = generation_error(ev)
            if err is not None:
                yield line({"error": err.message})
                return
            if ev.text:
                yield line(out.piece(ev.text))
            yield line(out.done("", ev.reason, counters(ev.stats)))
    except Exception as exc:  # a bug of ours: still end with a line clients understand
        yield line({"error": f"internal error: {exc}"})
    finally:
        job.cancel()
