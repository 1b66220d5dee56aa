"""Run the OpenAI-compatible server in a background thread of the app's process, on the
engine the app already holds, and keep a log of its requests for the Server tab."""

from __future__ import annotations

import threading
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

    def __init__(self, app, engine, entries: list[LogEntry]):
        self.app, self.engine, self.entries = app, engine, entries

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        start, wall, status = time.perf_counter(), time.time(), [0]
        before = {r.id for r in self.engine.recent}

        async def send_wrapper(message):
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            entry = LogEntry(wall, f"{scope['method']} {scope['path']}", status[0], time.perf_counter() - start)
            # The engine's history tells tokens and TTFT of API requests that finished meanwhile.
            done = [r for r in list(self.engine.recent) if r.id not in before and r.source == "api"]
            if done:
                entry.tokens = sum(r.generated_tokens for r in done)
                entry.ttft_s = done[0].ttft_s
            self.entries.append(entry)


class BackgroundServer:
    def __init__(self, engine, host: str = "127.0.0.1", port: int = 8080, socket: str | None = None,
                 api_key: str | None = None):
        import uvicorn

        from edge_infer.server.app import create_app
        from edge_infer.server.launch import check_bind, prepare_socket

        check_bind(host, api_key, socket)
        self.engine, self.host, self.port, self.socket, self.api_key = engine, host, port, socket, api_key
        self.log: list[LogEntry] = []
        app = RequestLog(create_app(engine, api_key=api_key), engine, self.log)
        if socket:
            prepare_socket(socket)
            config = uvicorn.Config(app, uds=socket, log_level="warning", lifespan="off")
        else:
            config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="off")
        self.server = uvicorn.Server(config)
        self.server.install_signal_handlers = lambda: None  # the app owns signals
        self.thread = threading.Thread(target=self.server.run, name="edge-infer-server", daemon=True)

    def start(self, timeout: float = 10.0) -> None:
        self.thread.start()
        deadline = time.monotonic() + timeout
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise EdgeInferError(f"the server could not listen on {self.address} (port in use?)")
            time.sleep(0.02)
        if self.socket:
            import os
            os.chmod(self.socket, 0o600)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
        if self.socket:
            import os
            try:
                os.unlink(self.socket)
            except FileNotFoundError:
                pass

    @property
    def address(self) -> str:
        return f"unix:{self.socket}" if self.socket else f"http://{self.host}:{self.port}"

    def curl_example(self) -> str:
        key = ' -H "Authorization: Bearer $EDGE_INFER_API_KEY"' if self.api_key else ""
        body = '{"messages": [{"role": "user", "content": "Hello!"}]}'
        if self.socket:
            return (f"curl --unix-socket {self.socket} http://localhost/v1/chat/completions{key} \\\n"
                    f"  -H 'Content-Type: application/json' -d '{body}'")
        return (f"curl http://{self.host}:{self.port}/v1/chat/completions{key} \\\n"
                f"  -H 'Content-Type: application/json' -d '{body}'")
