"""Installed models: the store's table with fit verdicts; load, quantize and delete one.

Verdicts come from plan.fit_verdict at the app's context x slots against this
machine (RAM read on every refresh, GPUs probed once off the UI thread). Deleting goes
through ModelStore.remove, after a confirmation, never for a loaded model. "● loaded"
marks every model the host holds (it may hold several), not only the default one.
"""

from __future__ import annotations

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.message import Message
from textual.widget import Widget
from textual.widgets import Button, DataTable, Static

from edge_infer.config import EngineSettings
from edge_infer.host import ModelHost
from edge_infer.tui.screens.dialogs import ConfirmScreen
from edge_infer.tui.screens.load_model import LoadModelScreen
from edge_infer.tui.screens.quantize import QuantizeScreen
from edge_infer.units import human_bytes


class InstalledModels(Widget):
    BINDINGS = [Binding("delete", "delete", "Delete model"), Binding("q", "quantize", "Quantize")]

    class Selected(Message):
        """The highlighted installed model changed (the ladder chart follows it)."""

        def __init__(self, model) -> None:
            super().__init__()
            self.model = model

    class QuantizeRequested(Message):
        def __init__(self, model, targets: list[str], from_f16: bool, allow_requantize: bool) -> None:
            super().__init__()
            self.model, self.targets = model, targets
            self.from_f16, self.allow_requantize = from_f16, allow_requantize

    def __init__(self, host: ModelHost, settings: EngineSettings, **kwargs) -> None:
        super().__init__(**kwargs)
        self.host = host
        self.settings = settings  # the app's defaults: the verdicts' ctx x slots, a first load's settings
        self.models: list = []
        self._gpus: tuple = ()

    def compose(self) -> ComposeResult:
        table = DataTable(id="installed", cursor_type="row")
        table.add_columns("model", "quant", "size", "source", "fit", "")
        yield table
        with Horizontal(classes="buttons"):
            yield Button("Load…", variant="primary", id="load-model")
            yield Button("Quantize…", id="quantize-model")
            yield Button("Delete…", variant="error", id="delete-model")
            yield Button("Refresh", id="refresh-models")
        yield Static(id="models-hint", classes="hint")

    def on_mount(self) -> None:
        self.refresh_models()
        self._probe_gpus()

    @work(thread=True, group="probe-gpus")
    def _probe_gpus(self) -> None:
        from edge_infer.engine import list_devices

        # llama.cpp's devices (loading its backends the first time: off the UI thread).
        gpus = tuple(d for d in list_devices() if d.kind not in ("cpu", "accel"))
        if gpus:
            self.app.call_from_thread(self._set_gpus, gpus)

    def _set_gpus(self, gpus) -> None:
        self._gpus = gpus
        self.refresh_models()

    def machine(self):
        from edge_infer.plan import detect_machine

        return detect_machine(self._gpus)

    def verdict(self, model, machine) -> str:
        from edge_infer.plan import engine_estimate_kwargs, fit_verdict
        from edge_infer.errors import EdgeInferError
        from edge_infer.gguf.info import read_model_info

        settings = self.settings
        try:
            fit = fit_verdict(read_model_info(model.path), machine, settings.ctx, settings.parallel,
                              **engine_estimate_kwargs(settings, machine))
        except (EdgeInferError, OSError):
            return "damaged"
        return fit.best + (" (GPU)" if fit.gpu is not None and fit.best == fit.gpu != fit.ram else "")

    def refresh_models(self) -> None:
        from edge_infer.store.store import ModelStore

        table = self.query_one("#installed", DataTable)
        keep = table.cursor_row
        self.models = ModelStore().installed()
        machine = self.machine()
        table.clear()
        loaded = {m.path for m in self.host.loaded()}
        for m in self.models:
            table.add_row(m.label, m.quant, human_bytes(m.size), m.source, self.verdict(m, machine),
                          "● loaded" if m.path in loaded else "", key=str(m.path))
        if self.models:
            table.move_cursor(row=min(keep or 0, len(self.models) - 1))
        settings = self.settings
        self.query_one("#models-hint", Static).update(
            f"Fit at ctx {settings.ctx} × {settings.parallel} slots on this machine. "
            "More from the Hub tab, or `edge-infer pull`." if self.models else
            "No models installed yet: search the Hub tab, or run `edge-infer provision`.")
        self.post_message(self.Selected(self.selected()))

    def selected(self):
        table = self.query_one("#installed", DataTable)
        if not self.models or table.cursor_row is None or table.cursor_row >= len(self.models):
            return None
        return self.models[table.cursor_row]

    @on(DataTable.RowHighlighted, "#installed")
    def _highlighted(self) -> None:
        self.post_message(self.Selected(self.selected()))

    @on(Button.Pressed, "#refresh-models")
    def _refresh(self) -> None:
        self.refresh_models()

    @on(DataTable.RowSelected, "#installed")
    @on(Button.Pressed, "#load-model")
    def action_load(self) -> None:
        model = self.selected()
        if model is None:
            return
        # Its own settings when it is loaded, else the default model's, else the app's.
        base = next((m for m in self.host.loaded() if m.path == model.path), None) or self.host.current
        settings = base.settings if base else self.settings

        def chosen(new_settings) -> None:
            if new_settings is not None:
                self.app.load_model(str(model.path), new_settings, name=model.label)

        self.app.push_screen(LoadModelScreen(model.label, model.path, settings), chosen)

    @on(Button.Pressed, "#quantize-model")
    def action_quantize(self) -> None:
        model = self.selected()
        if model is None:
            return

        def chosen(answer) -> None:
            if answer:
                self.post_message(self.QuantizeRequested(model, **answer))

        self.app.push_screen(QuantizeScreen(model.label, model.quant), chosen)

    @on(Button.Pressed, "#delete-model")
    def action_delete(self) -> None:
        model = self.selected()
        if model is None:
            return
        if any(m.path == model.path for m in self.host.loaded()):
            self.notify(f"{model.label} is loaded: unload it first (Server tab).", severity="warning")
            return

        def done(yes: bool) -> None:
            if yes:
                self.delete(model)

        self.app.push_screen(ConfirmScreen(f"Delete {model.label} ({human_bytes(model.size)}) from disk?"), done)

    @work(thread=True, group="delete-model")
    def delete(self, model) -> None:
        from edge_infer.errors import EdgeInferError
        from edge_infer.store.store import ModelStore

        try:
            ModelStore().remove(model)
        except (EdgeInferError, OSError) as exc:
            self.app.call_from_thread(self.notify, str(exc), title="Cannot delete", severity="error")
            return
        self.app.call_from_thread(self.refresh_models)
        self.app.call_from_thread(self.notify, f"Deleted {model.label} ({human_bytes(model.size)} freed).")
