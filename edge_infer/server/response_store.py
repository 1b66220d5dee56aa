"""Stored responses for OpenAI's Responses API (`store`, `previous_response_id`, GET/DELETE):
each response with the conversation that led to it, least recently used out, capped by
count and bytes. The conversation's KV cells live in the engine's slots and prompt cache,
so a continued conversation evaluates only its new turn."""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from dataclasses import dataclass

MAX_RESPONSES = 1000
MAX_BYTES = 64 << 20


@dataclass(frozen=True)
class Stored:
    response: dict        # the response object, as GET returns it
    messages: list[dict]  # the conversation in chat messages, this response's output included
    size: int             # bytes, as counted against the cap


class ResponseStore:
    def __init__(self, max_responses: int = MAX_RESPONSES, max_bytes: int = MAX_BYTES):
        self.max_responses, self.max_bytes = max_responses, max_bytes
        self._items: OrderedDict[str, Stored] = OrderedDict()
        self._lock = threading.Lock()
        self.bytes = 0
        self.evictions = 0

    def __len__(self) -> int:
        return len(self._items)

    def put(self, response: dict, messages: list[dict]) -> None:
        """Keep it (a response larger than the whole cap is not kept), evicting the least
        recently used ones until both caps hold."""
        size = len(json.dumps(response)) + len(json.dumps(messages))
        if size > self.max_bytes:
            return
        with self._lock:
            old = self._items.pop(response["id"], None)
            self.bytes -= old.size if old else 0
            self._items[response["id"]] = Stored(response, messages, size)
            self.bytes += size
            while len(self._items) > self.max_responses or self.bytes > self.max_bytes:
                _, gone = self._items.popitem(last=False)
                self.bytes -= gone.size
                self.evictions += 1

    def get(self, response_id: str) -> Stored | None:
        with self._lock:
            found = self._items.get(response_id)
            if found is not None:
                self._items.move_to_end(response_id)
            return found

    def delete(self, response_id: str) -> bool:
        with self._lock:
            gone = self._items.pop(response_id, None)
            self.bytes -= gone.size if gone else 0
            return gone is not None
