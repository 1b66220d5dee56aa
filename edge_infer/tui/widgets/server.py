"""Server: the host's models (widgets/host_models.py: load, unload, pin, default), and
start/stop the OpenAI-compatible API on the app's model host (every model loaded in the
app is served; installed ones load on demand), over TCP or a Unix socket, and watch its
requests."""

from __future__ import annotations

import time

from textual import on, work
from textual.app import ComposeResult
from textual.containers import Grid, Horizontal
from textual.widget import Widget
from textual.widgets import Button, DataTable, Input, Label, RadioButton, RadioSet, Static

from edge_infer.host import ModelHost
from edge_infer.tui.widgets.host_models import HostModels


class ServerPane(Widget):
    def __init__(self, host: ModelHost, **kw):
        super().__init__(**kw)
        self.host = host
        self.server = None
        self._seen = 0

    def compose(self) -> ComposeResult:
        yield HostModels(self.host, id="host-models-panel")
        yield Label("OpenAI-compatible server", classes="section")
        with RadioSet(id="transport"):
            yield RadioButton("TCP", value=True, id="use-tcp")
            yield RadioButton("Unix socket", id="use-socket")
        with Grid(id="server-grid"):
            yield Label("host")
            yield Input("127.0.0.1", id="host")
            yield Label("port")
            yield Input("8080", id="port", type="integer")
            yield Label("socket path")
            yield Input(id="socket")
            yield Label("API key")
            yield Input(placeholder="none (loopback and sockets only)", password=True, id="api-key")
        with Horizontal(classes="buttons"):
            yield Button("Start", variant="success", id="start-server")
            yield Button("Stop", variant="error", id="stop-server", disabled=True)
        yield Static("Server stopped.", id="server-status")
        yield Static(id="curl-example", classes="code")
        log = DataTable(id="request-log", cursor_type="none")
        log.add_columns("time", "endpoint", "status", "tokens", "TTFT", "ms")
        yield log

    def on_mount(self) -> None:
        from edge_infer import paths

        self.query_one("#socket", Input).value = str(paths.data_dir() / "edge-infer.sock")
        self.query_one("#curl-example", Static).display = False  # room for the log until it serves
        self.set_interval(0.5, self.poll_log)

    @on(Button.Pressed, "#start-server")
    def start_clicked(self) -> None:
        if not self.host.ready:
            self.notify("Load a model first (Models tab, or l on a model above).", severity="warning")
            return
        use_socket = self.query_one("#use-socket", RadioButton).value
        try:
            port = int(self.query_one("#port", Input).value)
        except ValueError:
            self.notify("The port must be a number.", severity="error")
            return
        self.start_server(host=self.query_one("#host", Input).value.strip(), port=port,
                          socket=self.query_one("#socket", Input).value.strip() if use_socket else None,
                          api_key=self.query_one("#api-key", Input).value.strip() or None)

    @work(thread=True, exclusive=True, group="server")
    def start_server(self, host: str, port: int, socket: str | None, api_key: str | None) -> None:
        from edge_infer.errors import EdgeInferError
        from edge_infer.tui.server_runner import TuiServer

        try:
            server = TuiServer(self.host, host=host, port=port, socket=socket, api_key=api_key)
            server.start()
        except (EdgeInferError, OSError, RuntimeError, ValueError) as exc:
            self.app.call_from_thread(self.notify, str(exc), title="Server did not start", severity="error",
                                      timeout=10)
            return
        self.server = server
        self.app.call_from_thread(self._started)

    def _started(self) -> None:
        s = self.server
        self.query_one("#server-status", Static).update(f"[green]●[/green] serving [b]{s.address}[/b]")
        self.query_one("#curl-example", Static).update(s.curl_example())
        self.query_one("#curl-example", Static).display = True
        self.query_one("#start-server", Button).disabled = True
        self.query_one("#stop-server", Button).disabled = False
        self.notify(f"Serving on {s.address}")

    @on(Button.Pressed, "#stop-server")
    def stop_clicked(self) -> None:
        self.stop_server()
        self.query_one("#server-status", Static).update("Server stopped.")
        self.query_one("#curl-example", Static).update("")
        self.query_one("#curl-example", Static).display = False
        self.query_one("#start-server", Button).disabled = False
        self.query_one("#stop-server", Button).disabled = True

    def stop_server(self) -> None:
        if self.server is not None:
            self.server.stop()
            self.server = None
            self._seen = 0  # the next server starts a new log

    def poll_log(self) -> None:
        if self.server is None:
            return
        new = self.server.log[self._seen:]
        if not new:
            return  # nothing new: leave the user's scroll position alone
        table = self.query_one("#request-log", DataTable)
        for e in new:
            table.add_row(time.strftime("%H:%M:%S", time.localtime(e.started_at)), e.endpoint, str(e.status),
                          "-" if e.tokens is None else str(e.tokens),
                          "-" if e.ttft_s is None else f"{e.ttft_s * 1000:.0f} ms", f"{e.duration_s * 1000:.0f}")
        self._seen += len(new)
        table.scroll_end(animate=False)
