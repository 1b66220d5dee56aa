"""NDJSON (Ollama's wire): one JSON object per line, and the response that streams them."""

from __future__ import annotations

import json

from edge_infer.server.sse import SSEResponse


class NDJSONResponse(SSEResponse):
    """One JSON object per line; a client leaving cancels the generation (SSEResponse)."""
    media_type = "application/x-ndjson"


def line(obj: dict) -> bytes:
    return (json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8", "backslashreplace")
