"""Run the OpenAI-compatible server in a background thread of the app's process, on the
app's model host (the models loaded in the app are served, installed ones load on
demand), and keep a log of its requests for the Server tab."""

from __future__ import annotations

import time
from dataclasses import dataclass

from edge_infer.errors import EdgeInferError


@dataclass
class LogEntry:
    started_at: float
    endpoint: str
    status: int
    duration_s: float
    tokens: int | None = None
    ttft_s: float | None = None


class RequestLog:
    """ASGI middleware: one LogEntry per HTTP request, with engine stats when it had any."""

    def __init__(self, app, host, entries: list[LogEntry]):
        self.app, self.host, self.entries = app, host, entries

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        start, wall, status = time.perf_counter(), time.time(), [0]
        # Any loaded model may answer (or one loads for this request): mark them all.
        since = FinishedSince(self._engines())

        async def send_wrapper(message):
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            entry = LogEntry(wall, f"{scope['method']} {scope['path']}", status[0], time.perf_counter() - start)
            # The engine's history tells tokens and TTFT of API requests that finished meanwhile.
            done = [r for r in since.finished(self._engines()) if r.source == "api"]
            if done:
                entry.tokens = sum(r.generated_tokens for r in done)
                entry.ttft_s = done[0].ttft_s
            self.entries.append(entry)

    def _engines(self):
        return [m.engine for m in self.host.loaded() if hasattr(m.engine, "recent")]


class FinishedSince:
    """The requests engines finished after a mark. An engine's `recent` is its history, newest
    last (a bounded deque that only grows at the end): what came after the newest entry it held
    at the mark is new; an engine with no entry then (or loaded since) has only new ones."""

    def __init__(self, engines):
        self.marks = {id(e): history[-1] for e in engines if (history := list(e.recent))}

    def finished(self, engines) -> list:
        """The new entries, each engine's oldest first."""
        out = []
        for e in engines:
            history = list(e.recent)
            mark = self.marks.get(id(e))
            cut = next((len(history) - k for k, r in enumerate(reversed(history)) if r is mark), 0)
            out += history[cut:]
        return out


class TuiServer:
    """The server tab's server: binds like `edge-infer serve` (0600 socket, loopback unless
    keyed) and runs uvicorn in a background thread on the app's model host."""

    def __init__(self, models, host: str = "127.0.0.1", port: int = 8080, socket: str | None = None,
                 api_key: str | None = None):
        from edge_infer.server.app import create_app
        from edge_infer.server.launch import BackgroundServer, bind_tcp, bind_unix, check_exposure

        if not socket:
            check_exposure(host, api_key)
        self.host, self.port, self.socket, self.api_key = host, port, socket, api_key
        self.log: list[LogEntry] = []
        app = RequestLog(create_app(models, api_key=api_key), models, self.log)
        sock = bind_unix(socket) if socket else bind_tcp(host, port)
        if not socket:
            self.port = sock.getsockname()[1]
        self._server = BackgroundServer(app, [sock])

    def start(self) -> None:
        try:
            self._server.start()
        except RuntimeError as exc:
            self._server.stop()
            raise EdgeInferError(f"the server could not start on {self.address}: {exc}") from None

    def stop(self) -> None:
        self._server.stop()

    @property
    def address(self) -> str:
        return f"unix:{self.socket}" if self.socket else f"http://{self.host}:{self.port}/v1"

    def curl_example(self) -> str:
        key = ' -H "Authorization: Bearer $EDGE_INFER_API_KEY"' if self.api_key else ""
        body = '{"messages": [{"role": "user", "content": "Hello!"}]}'
        target = (f"--unix-socket {self.socket} http://localhost" if self.socket
                  else f"http://{self.host}:{self.port}")
        return (f"curl {target}/v1/chat/completions{key} \\\n"
                f"  -H 'Content-Type: application/json' -d '{body}'")
