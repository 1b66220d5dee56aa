"""Load a model: GPU layers, threads, context and slots, with the memory plan shown first."""

from __future__ import annotations

import psutil
from textual import on
from textual.app import ComposeResult
from textual.containers import Grid, Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Static

from edge_infer.config import EngineSettings
from edge_infer.units import MiB

FIELDS = [("ctx", "context per sequence"), ("parallel", "parallel slots"),
          ("n_threads", "CPU threads"), ("n_gpu_layers", "GPU layers (-1 = all)")]


class LoadModelScreen(ModalScreen[EngineSettings | None]):
    BINDINGS = [("escape", "dismiss(None)", "Cancel")]

    def __init__(self, label: str, path, settings: EngineSettings):
        super().__init__()
        self.label, self.path, self.settings = label, path, settings
        self.info = None

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog wide"):
            yield Label(f"Load [b]{self.label}[/b]")
            with Grid(id="load-grid"):
                for name, text in FIELDS:
                    yield Label(text)
                    yield Input(str(getattr(self.settings, name)), id=f"l-{name}", type="integer")
            yield Static(id="plan")
            with Horizontal(classes="buttons"):
                yield Button("Load", variant="primary", id="load")
                yield Button("Cancel", id="cancel")

    def on_mount(self) -> None:
        from edge_infer.errors import EdgeInferError
        from edge_infer.gguf.info import read_model_info

        try:
            self.info = read_model_info(self.path)
        except EdgeInferError as exc:
            self.query_one("#plan", Static).update(f"[red]{exc}[/red]")
            self.query_one("#load", Button).disabled = True
            return
        self.update_plan()

    def chosen(self) -> EngineSettings | None:
        values = {}
        for name, _ in FIELDS:
            try:
                values[name] = int(self.query_one(f"#l-{name}", Input).value)
            except ValueError:
                return None
        if values["ctx"] < 16 or values["parallel"] < 1 or values["n_threads"] < 1:
            return None
        return EngineSettings(**{**self.settings.__dict__, **values})

    @on(Input.Changed)
    def update_plan(self) -> None:
        from edge_infer.plan import NO_FIT, engine_estimate_kwargs, estimate_memory, verdict

        s = self.chosen()
        plan = self.query_one("#plan", Static)
        if s is None or self.info is None:
            plan.update("[yellow]Enter whole numbers (context at least 16).[/yellow]")
            return
        est = estimate_memory(self.info, s.ctx, s.parallel, n_gpu_layers=s.n_gpu_layers,
                              **engine_estimate_kwargs(s))
        free = psutil.virtual_memory().available
        fit = verdict(est.total_bytes, free)  # the same rule as the installed table's verdicts
        fit = f"[red]{fit}[/red]" if fit == NO_FIT else fit
        warn = "" if s.ctx <= self.info.context_length else \
            f"\n[yellow]trained context is {self.info.context_length}: quality may drop beyond it[/yellow]"
        plan.update(
            f"memory plan: weights {est.weights_bytes / MiB:.0f} MiB + KV {est.kv_bytes / MiB:.0f} MiB "
            f"+ compute {est.compute_bytes / MiB:.0f} MiB = [b]{est.total_bytes / MiB:.0f} MiB[/b] "
            f"({free / MiB:.0f} MiB available: {fit}){warn}")

    @on(Button.Pressed)
    def done(self, event: Button.Pressed) -> None:
        if event.button.id == "cancel":
            self.dismiss(None)
            return
        s = self.chosen()
        if s is None:
            self.notify("Enter whole numbers (context at least 16).", severity="error")
            return
        self.dismiss(s)
