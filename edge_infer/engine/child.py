"""An Engine in a process of its own, behind the same interface (ServedEngine).

llama.cpp's RPC client ends the whole process when a worker disappears or answers badly
(GGML_ABORT in ggml-rpc.cpp), so a model placed on other machines runs here: the child
process loads it and runs the engine; this process keeps the vocabulary (a vocab-only
load: tokens as text, chat templates) and relays requests, events, snapshots and calls
over a pipe. When the child ends, every live request ends with reason "unavailable" (a 503
for clients), the engine's state says "failed", and the host loads the model again on the
next request that names it (host/model_host.py), once its workers answer.
"""

from __future__ import annotations

import itertools
import logging
import multiprocessing
import pickle
import threading
from collections import deque
from concurrent.futures import Future
from pathlib import Path

from edge_infer.errors import EdgeInferError, EngineClosedError
from edge_infer.engine.stream import FinishEvent, RequestStream

log = logging.getLogger("edge_infer.engine.child")
CALL_TIMEOUT = 600.0  # seconds a call (embed, snapshot) may take before it is given up


class ChildStream(RequestStream):
    def __init__(self, request_id: str, cancel, end_reasoning):
        super().__init__(request_id, cancel)
        self._end_reasoning = end_reasoning

    def end_reasoning(self) -> None:
        super().end_reasoning()
        self._end_reasoning()


class ChildEngine:
    """ServedEngine for a model whose engine runs in a child process."""

    def __init__(self, model_path: str | Path, settings, name: str | None = None, identity: str | None = None):
        from edge_infer.engine.native.llama import LlamaModel
        from edge_infer.engine.prompt import Prompter, read_template_file
        from edge_infer.gguf.info import read_model_info

        self.settings = s = settings
        self.info = read_model_info(model_path)
        self.name = name or Path(model_path).stem
        template_text = read_template_file(s.chat_template) if s.chat_template else None
        self.model = LlamaModel(Path(model_path), vocab_only=True)  # tokens as text, here
        self.prompts = Prompter(self.model, self.info.architecture, template_text, s.reasoning_budget)
        self.template = self.prompts.template
        self.recent: deque = deque(maxlen=200)
        self._streams: dict[str, ChildStream] = {}
        self._calls: dict[int, Future] = {}
        self._ids = itertools.count()
        self._send_lock = threading.Lock()
        self._closed, self._failed = False, None
        self._last_snapshot = None
        ctx = multiprocessing.get_context("spawn")  # never fork a process that holds llama.cpp threads
        self._conn, child_end = ctx.Pipe()
        self._proc = ctx.Process(target=child_main, args=(child_end, str(model_path), s, self.name, identity),
                                 name=f"edge-infer-engine-{self.name}", daemon=True)
        self._proc.start()
        child_end.close()
        try:
            kind, facts = self._conn.recv()
        except (EOFError, OSError):
            self._proc.join(5)
            raise EdgeInferError(f"{self.name}: the engine's process ended while loading (exit code "
                                 f"{self._proc.exitcode}): a worker was lost or refused it") from None
        if kind == "failed":
            self._proc.join(5)
            raise facts
        self.__dict__.update(facts)  # placement, plan, backend, n_ctx_seq, embedding facts
        threading.Thread(target=self._read, name=f"edge-infer-child-{self.name}", daemon=True).start()

    # ---- the ServedEngine interface --------------------------------------------------------
    @property
    def failure(self) -> str | None:
        """Why it failed (its process ended), or None."""
        return self._failed

    @property
    def state(self) -> str:
        if self._closed:
            return "closed"
        return "failed" if self._failed else "ok"

    def submit(self, request) -> ChildStream:
        if self._failed:
            raise EngineClosedError(self._failed)
        stream = ChildStream(request.id, lambda: self._tell(("cancel", request.id)),
                             lambda: self._tell(("end_reasoning", request.id)))
        self._streams[request.id] = stream
        try:
            stream.prompt_tokens, stream.starts_in_reasoning = self._call("submit", request)
        except BaseException:
            self._streams.pop(request.id, None)
            raise
        return stream

    def generate(self, request):
        return self.submit(request).result()

    def tokenize(self, text: str) -> list[int]:
        return self.prompts.tokenize(text)

    def tokenize_messages(self, messages: list[dict], tools: list[dict] | None = None) -> list[int]:
        return self.prompts.tokenize_messages(messages, tools)

    def embed(self, inputs, *, normalize: bool = True, dimensions: int | None = None):
        return self._call("embed", inputs, normalize=normalize, dimensions=dimensions)

    def rerank(self, query: str, documents: list[str]):
        return self._call("rerank", query, documents)

    def snapshot(self):
        if not self._failed and not self._closed:
            try:
                self._last_snapshot = self._call("snapshot", timeout=10)
            except EdgeInferError:
                pass
        return self._last_snapshot

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self._send(("close",))
        except EdgeInferError:
            pass
        self._proc.join(10)
        if self._proc.is_alive():
            self._proc.kill()
            self._proc.join(5)
        self.model.close()

    # ---- the pipe ----------------------------------------------------------------------------
    def _send(self, message) -> None:
        try:
            with self._send_lock:
                self._conn.send(message)
        except (OSError, ValueError) as exc:
            raise EngineClosedError(self._failed or f"{self.name}: the engine's process is gone ({exc})") from None

    def _tell(self, message) -> None:
        """A message that needs no answer: nothing to do once the child is gone (its requests ended)."""
        try:
            self._send(message)
        except EngineClosedError:
            pass

    def _call(self, method: str, *args, timeout: float = CALL_TIMEOUT, **kwargs):
        future: Future = Future()
        call_id = next(self._ids)
        self._calls[call_id] = future
        self._send(("call", call_id, method, args, kwargs))
        try:
            return future.result(timeout)
        except TimeoutError:
            raise EngineClosedError(f"{self.name}: the engine's process did not answer {method} "
                                    f"within {timeout:g} s") from None
        finally:
            self._calls.pop(call_id, None)

    def _read(self) -> None:
        while True:
            try:
                message = self._conn.recv()
            except (EOFError, OSError):
                break
            kind = message[0]
            if kind == "event":
                _, rid, event = message
                stream = self._streams.get(rid)
                if stream is not None:
                    stream.put(event)
                    if isinstance(event, FinishEvent):
                        self._streams.pop(rid, None)
            elif kind == "reply":
                _, call_id, ok, value = message
                future = self._calls.get(call_id)
                if future is not None and not future.done():
                    future.set_result(value) if ok else future.set_exception(value)
            elif kind == "recent":
                self.recent.append(message[1])
        self._lost()

    def _lost(self) -> None:
        """The child ended: every live request and call ends now, said in one line."""
        self._proc.join(5)
        if self._closed:
            why = "the engine shut down"
        else:
            why = (f"{self.name} is unavailable: its engine's process ended (exit code {self._proc.exitcode}; "
                   f"a worker of {', '.join(self.settings.rpc) or 'this model'} was lost or answered badly). "
                   "The next request loads it again once its workers answer")
            log.error(why)
        self._failed = why
        for rid, stream in list(self._streams.items()):
            stream.put(FinishEvent("unavailable", "", None, why))
        self._streams.clear()
        for future in list(self._calls.values()):
            if not future.done():
                future.set_exception(EngineClosedError(why))


def portable(exc: BaseException) -> BaseException:
    """`exc` if it survives pickling (ours do), else a one-line EdgeInferError with its text."""
    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:
        return EdgeInferError(f"{type(exc).__name__}: {exc}")


class _Announced(deque):
    """The child engine's `recent`: each finished request also goes to the parent."""

    def __init__(self, send, maxlen):
        super().__init__(maxlen=maxlen)
        self._announce = send

    def append(self, item) -> None:
        super().append(item)
        self._announce(("recent", item))


def child_main(conn, model_path: str, settings, name: str, identity: str | None) -> None:
    """The child process: register the workers, load the engine, serve the parent's pipe."""
    import os
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's: it closes us
    os.environ.setdefault("GGML_NO_BACKTRACE", "1")  # an abort here is expected (a worker lost): no gdb
    from edge_infer.engine.engine import Engine
    from edge_infer.engine.devices.rpc import add_workers

    try:
        add_workers(settings.rpc)
        engine = Engine(model_path, settings, name=name, identity=identity)
    except BaseException as exc:
        conn.send(("failed", portable(exc)))
        return
    lock = threading.Lock()

    def send(message) -> None:
        with lock:
            conn.send(message)

    engine.recent = _Announced(send, 200)
    streams: dict[str, RequestStream] = {}
    conn.send(("ready", {"placement": engine.placement, "plan": engine.plan, "backend": engine.backend,
                         "n_ctx_seq": engine.n_ctx_seq, "embedding_bytes": engine.embedding_bytes,
                         "embedding_size": engine.embedding_size, "embedding_tokens": engine.embedding_tokens,
                         "can_rerank": engine.can_rerank, "_last_snapshot": engine.snapshot()}))

    def forward(rid: str, stream: RequestStream) -> None:
        for event in stream:
            send(("event", rid, event))
        streams.pop(rid, None)

    def call(call_id: int, method: str, args, kwargs) -> None:
        try:
            if method == "submit":
                stream = engine.submit(*args)
                streams[stream.id] = stream
                threading.Thread(target=forward, args=(stream.id, stream), daemon=True).start()
                value = stream.prompt_tokens, stream.starts_in_reasoning
            else:
                value = getattr(engine, method)(*args, **kwargs)
            send(("reply", call_id, True, value))
        except BaseException as exc:
            send(("reply", call_id, False, portable(exc)))

    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            break  # the parent is gone
        kind = message[0]
        if kind == "call":
            if message[2] in ("submit", "snapshot"):  # quick: in order, on this thread
                call(*message[1:])
            else:
                threading.Thread(target=call, args=message[1:], daemon=True).start()
        elif kind in ("cancel", "end_reasoning") and (stream := streams.get(message[1])) is not None:
            stream.cancel() if kind == "cancel" else stream.end_reasoning()
        elif kind == "close":
            break
    engine.close()
