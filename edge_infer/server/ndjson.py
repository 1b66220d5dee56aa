"""NDJSON streaming (Ollama's wire): one JSON object per line, the streamed form of a Job."""

from __future__ import annotations

import json
from typing import AsyncIterator

from edge_infer.chat.reply import ReplyEnd
from edge_infer.server.jobs import Job, generation_error
from edge_infer.server.ollama_tools import done_reason, piece
from edge_infer.server.sse import SSEResponse


class NDJSONResponse(SSEResponse):
    """One JSON object per line; a client leaving cancels the generation (SSEResponse)."""
    media_type = "application/x-ndjson"


def line(obj: dict) -> bytes:
    return (json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8", "backslashreplace")


async def stream_lines(job: Job, out, counters) -> AsyncIterator[bytes]:
    """A line per token's reply events (content, thinking, whole tool calls), then the `done`
    object with the counters; a failure is an {"error"} line (the ollama client raises it)
    and the stream ends there."""
    try:
        async for _, _, events in job.replies():
            end = events[-1] if events and isinstance(events[-1], ReplyEnd) else None
            if end is not None and (err := generation_error(end)) is not None:
                yield line({"error": err.message})
                return
            if (obj := piece(out, events)) is not None:
                yield line(obj)
            if end is not None:
                yield line(out.done("", done_reason(end.finish_reason), counters(end.stats)))
    except Exception as exc:  # a bug of ours: still end with a line clients understand
        yield line({"error": f"internal error: {exc}"})
    finally:
        job.cancel()
