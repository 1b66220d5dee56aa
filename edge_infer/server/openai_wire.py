"""OpenAI wire shapes for chat and text completions, whole and streamed (the Responses API's
are in openai_responses.py and responses_wire.py).

Built as plain dicts (one per streamed token, so no model validation on the hot path).
ChatWire and TextWire differ only in names and where text and logprobs go.
"""

from __future__ import annotations

import json
import time
import uuid

import numpy as np

from edge_infer import __version__
from edge_infer.chat.events import ContentDelta, ReasoningDelta, ToolCallArgsDelta, ToolCallStart, new_call_id
from edge_infer.chat.reply import Reply

FINGERPRINT = f"edge-infer-{__version__}"


def sse(data: dict | str, event: str | None = None) -> bytes:
    payload = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {payload}\n\n".encode("utf-8", "backslashreplace")  # lone surrogates: as \u escapes


DONE = b"data: [DONE]\n\n"


def usage(prompt_tokens: int, completion_tokens: int, cached_tokens: int = 0) -> dict:
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
            "prompt_tokens_details": {"cached_tokens": cached_tokens}}


class TokenText:
    """Token id -> bytes, cached (the vocabulary never changes while serving)."""

    def __init__(self, piece):
        self._piece = piece
        self._cache: dict[int, bytes] = {}

    def __call__(self, token: int) -> bytes:
        b = self._cache.get(token)
        if b is None:
            b = self._cache[token] = self._piece(token)
        return b


def top_k(logprobs: np.ndarray, k: int) -> list[tuple[int, float]]:
    if k <= 0:
        return []
    idx = np.argpartition(-logprobs, k - 1)[:k]
    idx = idx[np.argsort(-logprobs[idx])]
    return [(int(i), float(logprobs[i])) for i in idx]


def delta_of(event) -> dict | None:
    """A reply event as an OpenAI chat `delta` (None: nothing this wire sends for it)."""
    if isinstance(event, ContentDelta):
        return {"content": event.text}
    if isinstance(event, ReasoningDelta):
        return {"reasoning_content": event.text}
    if isinstance(event, ToolCallStart):
        return {"tool_calls": [{"index": event.index, "id": event.id, "type": "function",
                                "function": {"name": event.name, "arguments": ""}}]}
    if isinstance(event, ToolCallArgsDelta):
        return {"tool_calls": [{"index": event.index, "function": {"arguments": event.fragment}}]}
    return None


class ChatWire:
    object, chunk_object, prefix = "chat.completion", "chat.completion.chunk", "chatcmpl-"

    def __init__(self, model: str, include_usage: bool = False):
        self.id = self.prefix + uuid.uuid4().hex[:24]
        self.created = int(time.time())
        self.model = model
        self.include_usage = include_usage

    def _envelope(self, obj: str) -> dict:
        return {"id": self.id, "object": obj, "created": self.created, "model": self.model,
                "system_fingerprint": FINGERPRINT}

    def chunk(self, choices: list[dict], usage_: dict | None = None) -> dict:
        d = self._envelope(self.chunk_object)
        d["choices"] = choices
        if self.include_usage:  # OpenAI sends usage: null on every chunk but the last
            d["usage"] = usage_
        return d

    # one choice's pieces --------------------------------------------------------------
    def opening(self, index: int) -> dict | None:
        return {"index": index, "delta": {"role": "assistant", "content": ""}, "logprobs": None,
                "finish_reason": None}

    def delta(self, index: int, text: str, logprobs: list | None) -> dict:
        return {"index": index, "delta": {"content": text} if text else {},
                "logprobs": {"content": logprobs, "refusal": None} if logprobs is not None else None,
                "finish_reason": None}

    def closing(self, index: int, text: str, reason: str) -> dict:
        return {"index": index, "delta": {"content": text} if text else {}, "logprobs": None,
                "finish_reason": reason}

    def piece(self, index: int, event, logprobs: list | None) -> dict | None:
        """A reply event (None: logprobs alone) as a chunk's choice; None: nothing to send."""
        delta = delta_of(event)
        if delta is None and logprobs is None:
            return None
        return {"index": index, "delta": delta or {},
                "logprobs": {"content": logprobs, "refusal": None} if logprobs is not None else None,
                "finish_reason": None}

    def whole(self, index: int, reply: Reply, logprobs: list | None, echo: str = "") -> dict:
        message: dict = {"role": "assistant", "content": reply.content}
        if reply.reasoning is not None:
            message["reasoning_content"] = reply.reasoning
        if reply.tool_calls:
            message["tool_calls"] = [{"id": c.id or new_call_id(), "type": "function",
                                      "function": {"name": c.name, "arguments": c.arguments_json}}
                                     for c in reply.tool_calls]
        message["refusal"] = None
        return {"index": index, "message": message,
                "logprobs": {"content": logprobs, "refusal": None} if logprobs is not None else None,
                "finish_reason": reply.finish_reason}

    def response(self, choices: list[dict], usage_: dict) -> dict:
        d = self._envelope(self.object)
        d.update(choices=choices, usage=usage_)
        return d

    @staticmethod
    def logprob_entries(events: list[tuple[int, np.ndarray]], k: int, text_of: TokenText,
                        offset: int = 0) -> list:
        """[(token, log-softmax vector)] -> chat logprobs `content` items (offset: unused)."""
        def item(tok: int, lp: float) -> dict:
            b = text_of(tok)
            return {"token": b.decode("utf-8", "replace"), "logprob": lp, "bytes": list(b)}

        out = []
        for tok, lps in events:
            entry = item(tok, float(lps[tok]))
            entry["top_logprobs"] = [item(t, v) for t, v in top_k(lps, k)]
            out.append(entry)
        return out


class TextWire(ChatWire):
    object, chunk_object, prefix = "text_completion", "text_completion", "cmpl-"

    def opening(self, index: int) -> dict | None:
        return None  # text completions have no role chunk

    def delta(self, index: int, text: str, logprobs: dict | None) -> dict:
        return {"index": index, "text": text, "logprobs": logprobs, "finish_reason": None}

    def closing(self, index: int, text: str, reason: str) -> dict:
        return {"index": index, "text": text, "logprobs": None, "finish_reason": reason}

    def piece(self, index: int, event, logprobs: dict | None) -> dict | None:
        text = event.text if isinstance(event, ContentDelta) else ""
        if not text and logprobs is None:
            return None
        return self.delta(index, text, logprobs)

    def whole(self, index: int, reply: Reply, logprobs: dict | None, echo: str = "") -> dict:
        return {"index": index, "text": echo + (reply.content or ""), "logprobs": logprobs,
                "finish_reason": reply.finish_reason}

    @staticmethod
    def logprob_entries(events: list[tuple[int, np.ndarray]], k: int, text_of: TokenText,
                        offset: int = 0) -> dict:
        """The legacy completions shape: parallel lists, top_logprobs as {token: logprob}."""
        tokens, token_lps, tops, offsets = [], [], [], []
        for tok, lps in events:
            s = text_of(tok).decode("utf-8", "replace")
            tokens.append(s)
            token_lps.append(float(lps[tok]))
            tops.append({text_of(t).decode("utf-8", "replace"): v for t, v in top_k(lps, k)})
            offsets.append(offset)
            offset += len(s)
        return {"tokens": tokens, "token_logprobs": token_lps, "top_logprobs": tops, "text_offset": offsets}
