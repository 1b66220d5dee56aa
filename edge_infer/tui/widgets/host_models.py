"""The host's models on the Server tab: loaded, loading and installed ones with memory,
live requests, idle time and keep-alive; load, unload, pin and make default.

The table re-reads host.entries() every second (memory only, no disk) and posts
HostModels.Changed when the loaded set, a pin or the default changes, so the rest of
the app (title, chat, Models tab) follows models loaded on demand, unloaded by
keep-alive or evicted for room. Loading and unloading run in thread workers.
"""

from __future__ import annotations

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.message import Message
from textual.widget import Widget
from textual.widgets import Button, DataTable, Label

from edge_infer.host import FOREVER, ModelEntry, ModelHost
from edge_infer.units import human_bytes, human_duration

COLUMNS = [("model", "model"), ("state", "state"), ("ram", "RAM"), ("active", "active"), ("idle", "idle"),
           ("keep", "keep-alive"), ("pinned", "pinned"), ("default", "default")]
POLL_S = 1.0
UNLIMITED = 1 << 60  # a budget this large is "no limit" (the host's default)


def row_cells(e: ModelEntry | dict) -> tuple[str, ...]:
    """One model as the table shows it (a dict: as the host's listing() gives it)."""
    if isinstance(e, dict):
        e = ModelEntry.from_dict(e)
    name = e.name
    if e.state == "unavailable":  # its engine process ended (a worker lost): reloads on the next use
        return name, "✖ unavailable", "-", str(e.active), "", "", "", ""
    if e.is_remote:  # served elsewhere (edge_infer.remote): how many of its servers answer
        return name, f"⇄ remote, {e.healthy}/{len(e.upstreams)} up", "-", str(e.active), "", "", "", ""
    if e.state == "unloaded":
        return name, "unloaded", "-", "", "", "", "", ""
    ram = human_bytes(e.memory.ram) + (f" + {human_bytes(e.memory.vram)} GPU" if e.memory.vram else "")
    state = "● loaded" if e.state == "loaded" else "◌ loading"
    if e.state == "loading":
        idle = keep = ""
    elif e.active:
        idle, keep = "busy", "-"
    else:
        idle = human_duration(e.idle_seconds)
        keep = "pinned" if e.pinned else (
            f"unloads in {human_duration(e.expires_in)}" if e.expires_in is not None
            else "until needed" if e.keep_alive == FOREVER else human_duration(e.keep_alive))
    return (name, state, ram, str(e.active), idle, keep, "yes" if e.pinned else "",
            "yes" if e.default else "")


def row_key(e: ModelEntry) -> str:
    """A local model's file, a remote model's name: what tells rows apart."""
    return f"remote:{e.name}" if e.is_remote else str(e.path)


class HostModels(Widget):
    BINDINGS = [Binding("l", "load", "Load"), Binding("u", "unload", "Unload"),
                Binding("p", "pin", "Pin/unpin"), Binding("d", "make_default", "Make default")]

    class Changed(Message):
        """A model was loaded or unloaded, pinned, or became the default."""

        def __init__(self, loading: list[str]) -> None:
            super().__init__()
            self.loading = loading  # models loading now

    def __init__(self, host: ModelHost, **kw):
        super().__init__(**kw)
        self.host = host
        self.entries: dict[str, ModelEntry] = {}  # row key (row_key) -> the model's entry
        self._signature: tuple = ()

    def compose(self) -> ComposeResult:
        yield Label("Models on this host", id="host-models-title", classes="section")
        table = DataTable(id="host-models", cursor_type="row")
        for key, label in COLUMNS:
            table.add_column(label, key=key)
        yield table
        with Horizontal(id="host-model-buttons"):
            yield Button("Load", id="model-load", compact=True)
            yield Button("Unload", id="model-unload", compact=True)
            yield Button("Pin/unpin", id="model-pin", compact=True)
            yield Button("Make default", id="model-default", compact=True)
            yield Label("l load · u unload · p pin · d default", classes="hint")

    def on_mount(self) -> None:
        self.refresh_table()
        self.poller = self.set_interval(POLL_S, self.refresh_table)

    # ---- the table -----------------------------------------------------------------------
    def refresh_table(self) -> None:
        listing = self.host.entries()
        table = self.query_one("#host-models", DataTable)
        rows = {row_key(e): row_cells(e) for e in listing}
        if list(rows) == list(self.entries):  # same models: update changed cells only
            for key, cells in rows.items():
                old = row_cells(self.entries[key])
                for (column, _), new, was in zip(COLUMNS, cells, old):
                    if new != was:
                        table.update_cell(key, column, new)
        else:
            keep = self.selected()
            table.clear()
            for key, cells in rows.items():
                table.add_row(*cells, key=key)
            if keep is not None and row_key(keep) in rows:
                table.move_cursor(row=list(rows).index(row_key(keep)))
        self.entries = {row_key(e): e for e in listing}
        self._update_title(listing)
        signature = tuple((e.name, e.state, e.pinned, e.default) for e in listing if e.state != "unloaded")
        if signature != self._signature:
            self._signature = signature
            self.post_message(self.Changed([e.name for e in listing if e.state == "loading"]))

    def _update_title(self, listing: list[ModelEntry]) -> None:
        loaded = [e for e in listing if e.state not in ("unloaded", "remote")]
        text = f"Models on this host · {len(loaded)} loaded"
        if loaded:
            used = self.host.used()
            text += f" · {human_bytes(used.ram)} RAM"
            if self.host.budget.ram < UNLIMITED:
                text += f" of {human_bytes(self.host.budget.ram)}"
        self.query_one("#host-models-title", Label).update(text)

    def selected(self) -> ModelEntry | None:
        table = self.query_one("#host-models", DataTable)
        if not table.row_count or table.cursor_row is None or table.cursor_row >= table.row_count:
            return None
        key = table.coordinate_to_cell_key((table.cursor_row, 0)).row_key.value
        return self.entries.get(key)

    # ---- actions -------------------------------------------------------------------------
    def _pick(self, loaded: bool = False) -> ModelEntry | None:
        entry = self.selected()
        if entry is None:
            self.notify("No model selected.", severity="warning")
            return None
        if entry.is_remote:
            where = ", ".join(u["url"] for u in entry.upstreams)
            self.notify(f"{entry.name} is served by {where}: nothing to load, pin or unload here.")
            return None
        if loaded and entry.state != "loaded":
            self.notify(f"{entry.name} is not loaded: load it first (l).", severity="warning")
            return None
        return entry

    @on(Button.Pressed, "#model-load")
    def action_load(self) -> None:
        entry = self._pick()
        if entry is None:
            return
        if entry.state != "unloaded":
            self.notify(f"{entry.name} is already {entry.state}.")
            return
        self.load(entry.name)

    @on(Button.Pressed, "#model-unload")
    def action_unload(self) -> None:
        entry = self._pick(loaded=True)
        if entry is not None:
            self.unload(entry.name)

    @on(Button.Pressed, "#model-pin")
    def action_pin(self) -> None:
        entry = self._pick(loaded=True)
        if entry is None:
            return
        pinned = not entry.pinned
        try:
            self.host.pin(entry.name, pinned)
        except Exception as exc:  # it went meanwhile (unloaded, evicted)
            self.notify(str(exc), title="Cannot pin", severity="error")
            return
        self.refresh_table()
        self.notify(f"{entry.name} is pinned: it stays loaded." if pinned
                    else f"{entry.name} is unpinned: keep-alive and eviction apply again.")

    @on(Button.Pressed, "#model-default")
    def action_make_default(self) -> None:
        entry = self._pick()
        if entry is None:
            return
        if entry.state == "unloaded":
            self.load(entry.name, make_default=True)
            return
        try:
            self.host.set_default(entry.name)
        except Exception as exc:
            self.notify(str(exc), title="Cannot make default", severity="error")
            return
        self.refresh_table()
        self.notify(f"{entry.name} is the default model.")

    @work(thread=True, group="host-models")
    def load(self, name: str, make_default: bool = False) -> None:
        call = self.app.call_from_thread
        call(self.notify, f"Loading {name}…")
        try:
            lease = self.host.acquire(name)  # loads it (making room if needed); the lease only proves it
            lease.release()
            if make_default:
                self.host.set_default(lease.name)
        except Exception as exc:  # does not fit, busy, damaged file, llama.cpp refused: never the app's end
            call(self.notify, str(exc) or type(exc).__name__, title=f"Cannot load {name}", severity="error",
                 timeout=10)
            call(self.refresh_table)
            return
        call(self.refresh_table)
        call(self.notify, f"{lease.name} is loaded{' and the default' if make_default else ''}.")

    @work(thread=True, group="host-models")
    def unload(self, name: str) -> None:
        call = self.app.call_from_thread
        found = self.host.find(name)
        busy = found is not None and not found.idle()
        if found is not None and self.host.current is found:
            # The app keeps a default while any model is loaded: the most recently used other one.
            others = sorted((m for m in self.host.loaded() if m is not found), key=lambda m: m.last_used)
            if others:
                self.host.set_default(others[-1].name)
        try:
            done = self.host.unload(name)
        except Exception as exc:
            call(self.notify, str(exc), title=f"Cannot unload {name}", severity="error")
            return
        call(self.refresh_table)
        if not done:
            call(self.notify, f"{name} is not loaded.", severity="warning")
        else:
            call(self.notify, f"{name} unloads after its last request." if busy else f"Unloaded {name}.")
