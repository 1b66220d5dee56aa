"""Models: what is installed (with fit verdicts), load one, delete one."""

from __future__ import annotations

import psutil
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.widget import Widget
from textual.widgets import Button, DataTable, Label, Static

from edge_infer.tui.screens.dialogs import ConfirmScreen
from edge_infer.tui.screens.load_model import LoadModelScreen

MIB = 2**20


def fit_verdict(path, settings) -> str:
    from edge_infer.engine.memory import estimate_memory
    from edge_infer.errors import EdgeInferError
    from edge_infer.store.gguf_info import read_model_info

    try:
        est = estimate_memory(read_model_info(path), settings.ctx, settings.parallel,
                              kv_unified=settings.kv_unified, flash_attn=settings.flash_attn != "off")
    except EdgeInferError:
        return "damaged"
    free = psutil.virtual_memory().available
    return "fits" if est.total_bytes < 0.7 * free else "tight" if est.total_bytes < free else "does not fit"


class ModelsPane(Widget):
    BINDINGS = [Binding("enter", "load", "Load", show=False), Binding("delete", "delete", "Delete model")]

    def compose(self) -> ComposeResult:
        yield Label("Installed models", classes="section")
        table = DataTable(id="installed", cursor_type="row")
        table.add_columns("model", "quant", "size", "source", "fit", "")
        yield table
        with Horizontal(classes="buttons"):
            yield Button("Load…", variant="primary", id="load-model")
            yield Button("Delete…", variant="error", id="delete-model")
            yield Button("Refresh", id="refresh-models")
        yield Static(id="models-hint", classes="hint")

    def on_mount(self) -> None:
        self.refresh_models()

    def refresh_models(self) -> None:
        from edge_infer.store.store import ModelStore

        self.models = ModelStore().installed()
        settings = self.app.default_settings
        table = self.query_one("#installed", DataTable)
        table.clear()
        loaded = self.app.host.model_path
        for m in self.models:
            table.add_row(m.label, m.quant, f"{m.size / MIB:.0f} MiB", m.source, fit_verdict(m.path, settings),
                          "● loaded" if loaded and m.path == loaded else "", key=str(m.path))
        self.query_one("#models-hint", Static).update(
            f"Fit verdicts at ctx {settings.ctx} × {settings.parallel} slots against available RAM. "
            "Install more with `edge-infer provision` or `edge-infer pull`." if self.models else
            "No models installed yet: run `edge-infer provision`.")

    def selected(self):
        table = self.query_one("#installed", DataTable)
        if not self.models or table.cursor_row is None or table.cursor_row >= len(self.models):
            return None
        return self.models[table.cursor_row]

    @on(Button.Pressed, "#refresh-models")
    def _refresh(self) -> None:
        self.refresh_models()

    @on(Button.Pressed, "#load-model")
    def action_load(self) -> None:
        model = self.selected()
        if model is None:
            return
        settings = self.app.host.settings or self.app.default_settings

        def chosen(new_settings) -> None:
            if new_settings is not None:
                self.app.load_model(str(model.path), new_settings, name=model.label)

        self.app.push_screen(LoadModelScreen(model.label, model.path, settings), chosen)

    @on(DataTable.RowSelected, "#installed")
    def _row(self) -> None:
        self.action_load()

    @on(Button.Pressed, "#delete-model")
    def action_delete(self) -> None:
        model = self.selected()
        if model is None:
            return
        if self.app.host.model_path == model.path:
            self.notify("That model is loaded: load another one first.", severity="warning")
            return

        def done(yes: bool) -> None:
            if yes:
                self.delete(model)

        self.app.push_screen(ConfirmScreen(f"Delete {model.label} ({model.size / MIB:.0f} MiB) from disk?"), done)

    @work(thread=True)
    def delete(self, model) -> None:
        import shutil

        shutil.rmtree(model.path.parent, ignore_errors=True)
        self.app.call_from_thread(self.refresh_models)
        self.app.call_from_thread(self.notify, f"Deleted {model.label}.")
