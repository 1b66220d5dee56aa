"""Per-request output: events from the engine thread to whoever submitted.

Iterate it (CLI, worker threads) or `async for` it (the server). Both read one
thread-safe queue; the async side is woken through the loop it registered, once for all the
events on that loop that arrive before it runs (LoopWakeups).
"""

from __future__ import annotations

import asyncio
import queue
import threading
import weakref
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from edge_infer.chat.reply import FinishReason
from edge_infer.engine.stats import RequestStats


@dataclass
class TokenEvent:
    token: int
    text: str                          # may be "" while UTF-8 or a stop string is pending
    logprobs: np.ndarray | None = None  # full log-softmax over the vocab, when asked for
    call_began: bool = False            # this token opened a tool call: the call grammar writes the rest


@dataclass
class FinishEvent:
    reason: FinishReason               # stop | length | cancelled | error | timeout
    text: str = ""                     # text released at the end (flushed holdback)
    stats: RequestStats | None = None
    error: str | None = None
    stop_sequence: str | None = None   # the stop string that ended it (reason "stop")


@dataclass
class Completion:
    text: str
    tokens: list[int]
    finish_reason: FinishReason
    stats: RequestStats
    logprobs: list[np.ndarray] = field(default_factory=list)
    error: str | None = None


class LoopWakeups:
    """Events to set on one event loop, handed to it in one call for all that arrive before
    it runs (a `call_soon_threadsafe` is a write to the loop's self-pipe).

    Tried and left: deferring an engine step's wake-ups to its end (one per step). At eight
    clients it took the engine thread's time in stream.put from 3.2% to 0.1% (py-spy), but at
    one client with speculation its runs read 72-73 tok/s against 74-83 without it
    (alternating, SmolLM2, 2 cores): maybe noise, maybe the loop taking the GIL just as the
    engine prepares the next batch. Measure it on a quieter machine before bringing it back.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop):
        self._loop = weakref.ref(loop)  # weak: the registry below is keyed by the loop
        self._lock = threading.Lock()
        self._pending: list[asyncio.Event] = []  # non-empty = a call to set them is on its way

    def wake(self, event: asyncio.Event) -> None:
        with self._lock:
            scheduled = bool(self._pending)
            self._pending.append(event)
        if scheduled:
            return
        loop = self._loop()
        try:
            if loop is None:
                raise RuntimeError("the event loop is gone")
            loop.call_soon_threadsafe(self._set_pending)
        except RuntimeError:  # the loop is closed: nobody is listening, and nothing will be set
            with self._lock:
                self._pending = []

    def _set_pending(self) -> None:
        with self._lock:
            events, self._pending = self._pending, []
        for event in events:
            event.set()


_wakeups: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_wakeups_lock = threading.Lock()


def wakeups_for(loop: asyncio.AbstractEventLoop) -> LoopWakeups:
    with _wakeups_lock:
        found = _wakeups.get(loop)
        if found is None:
            found = _wakeups[loop] = LoopWakeups(loop)
        return found


class RequestStream:
    def __init__(self, request_id: str, cancel: Callable[[], None], prompt_tokens: int = 0,
                 starts_in_reasoning: bool = False):
        self.id = request_id
        self.prompt_tokens = prompt_tokens  # as tokenized at submit (what its usage will count)
        self.starts_in_reasoning = starts_in_reasoning  # the template opened <think>: the reply starts inside it
        self.reasoning_cut = False  # set by end_reasoning(): the engine closes the reply's <think> block
        self._cancel = cancel
        self._q: queue.SimpleQueue = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._waker: tuple[LoopWakeups, asyncio.Event] | None = None
        self.finished: FinishEvent | None = None

    # engine side -----------------------------------------------------------
    def put(self, event) -> None:
        self._q.put(event)
        with self._lock:
            waker = self._waker
        if waker is not None:
            wakeups, ev = waker
            wakeups.wake(ev)

    # consumer side ---------------------------------------------------------
    def cancel(self) -> None:
        self._cancel()

    def end_reasoning(self) -> None:
        """End the reply's reasoning now: the engine writes the close marker at the next token
        and the model goes on to its answer (the TUI's key)."""
        self.reasoning_cut = True

    def __iter__(self):
        while True:
            event = self._q.get()
            yield event
            if isinstance(event, FinishEvent):
                self.finished = event
                return

    async def __aiter__(self):
        ev = asyncio.Event()
        with self._lock:
            self._waker = (wakeups_for(asyncio.get_running_loop()), ev)
        while True:
            ev.clear()
            got_any = False
            while True:
                try:
                    event = self._q.get_nowait()
                except queue.Empty:
                    break
                got_any = True
                yield event
                if isinstance(event, FinishEvent):
                    self.finished = event
                    return
            if not got_any:
                await ev.wait()

    def result(self) -> Completion:
        """Consume the whole stream."""
        parts, tokens, logprobs = [], [], []
        for event in self:
            if isinstance(event, TokenEvent):
                parts.append(event.text)
                tokens.append(event.token)
                if event.logprobs is not None:
                    logprobs.append(event.logprobs)
            else:
                parts.append(event.text)
                return Completion("".join(parts), tokens, event.reason, event.stats, logprobs, event.error)
        raise RuntimeError("stream ended without a finish event")
