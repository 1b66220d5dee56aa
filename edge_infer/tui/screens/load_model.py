"""Load a model: GPU layers, threads, context and slots, KV cache types and pool, workers on
other machines, with the memory plan shown first: what each device (CPU, each GPU, each
worker) gets, updated as fields change."""

from __future__ import annotations

import psutil
from textual import on, work
from textual.app import ComposeResult
from textual.containers import Grid, Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Select, Static

from edge_infer.config import EngineSettings
from edge_infer.errors import EdgeInferError
from edge_infer.plan.kv_pool import parse_kv_budget
from edge_infer.plan.kv_types import DEFAULT_KV_TYPE, KV_TYPES, check_kv_types
from edge_infer.units import MiB

FIELDS = [("ctx", "context per sequence"), ("parallel", "parallel slots"),
          ("n_threads", "CPU threads"), ("n_gpu_layers", "GPU layers (blank = fit)")]
OPTIONAL = {"n_gpu_layers"}  # blank = the plan decides
TYPES = [("cache_type_k", "K cache type"), ("cache_type_v", "V cache type")]
NUMBERS = "Enter whole numbers (context at least 16)."


class LoadModelScreen(ModalScreen[EngineSettings | None]):
    BINDINGS = [("escape", "dismiss(None)", "Cancel")]

    def __init__(self, label: str, path, settings: EngineSettings):
        super().__init__()
        self.label, self.path, self.settings = label, path, settings
        self.info = None
        self.machine = None  # RAM and llama.cpp's devices, read once on mount
        self.problem = ""  # why chosen() gave None: shown in the plan, one line
        self.with_workers: dict[tuple, object] = {}  # workers -> this machine with them, or why not

    def compose(self) -> ComposeResult:
        s = self.settings
        with Vertical(classes="dialog wide"):
            yield Label(f"Load [b]{self.label}[/b]")
            # Compact widgets, one line a row: the dialog must fit an 80x24 terminal.
            with Grid(id="load-grid"):
                for name, text in FIELDS:
                    yield Label(text)
                    value = getattr(s, name)
                    yield Input("" if value is None else str(value), id=f"l-{name}", type="integer",
                                compact=True, placeholder="as many as fit" if name in OPTIONAL else "")
                for name, text in TYPES:
                    yield Label(text)
                    # A type this dialog does not offer (set by env) falls back to the default.
                    value = getattr(s, name) if getattr(s, name) in KV_TYPES else DEFAULT_KV_TYPE
                    yield Select([(t, t) for t in KV_TYPES], value=value, allow_blank=False,
                                 id=f"l-{name}", compact=True)
                yield Label("KV pool budget")
                yield Input(s.kv_budget, id="l-kv_budget", compact=True,
                            placeholder="default (2 contexts); 256MiB, 1GiB, 8192cells")
                yield Label("prompt cache MiB (-1 auto)")
                yield Input(str(s.prompt_cache_mib), id="l-prompt_cache_mib", type="integer", compact=True)
                yield Label("workers (RPC)")
                yield Input(",".join(s.rpc), id="l-rpc", compact=True,
                            placeholder="none; host:port,... running `edge-infer worker`")
            yield Static(id="plan")
            with Horizontal(classes="buttons"):
                yield Button("Load", variant="primary", id="load")
                yield Button("Cancel", id="cancel")

    def on_mount(self) -> None:
        from edge_infer.gguf.info import read_model_info

        from edge_infer.engine import this_machine

        try:
            self.info = read_model_info(self.path)
            self.machine = this_machine()
        except EdgeInferError as exc:
            self._refuse(str(exc))
            return
        self.update_plan()

    def chosen(self) -> EngineSettings | None:
        """The settings the fields describe, or None with self.problem saying why (never raises)."""
        values = {}
        for name in [n for n, _ in FIELDS] + ["prompt_cache_mib"]:
            text = self.query_one(f"#l-{name}", Input).value.strip()
            if name in OPTIONAL and not text:
                values[name] = None
                continue
            try:
                values[name] = int(text)
            except ValueError:
                self.problem = NUMBERS
                return None
        if values["ctx"] < 16 or values["parallel"] < 1 or values["n_threads"] < 1 \
                or values["prompt_cache_mib"] < -1:
            self.problem = NUMBERS
            return None
        for name, _ in TYPES:
            values[name] = str(self.query_one(f"#l-{name}", Select).value)
        values["kv_budget"] = self.query_one("#l-kv_budget", Input).value.strip()
        try:
            from edge_infer.engine import parse_endpoints

            values["rpc"] = parse_endpoints(self.query_one("#l-rpc", Input).value)
            # The same checks, and messages, as the command line's flags.
            check_kv_types(values["cache_type_k"], values["cache_type_v"], self.settings.flash_attn)
            if values["kv_budget"]:
                parse_kv_budget(values["kv_budget"])
        except EdgeInferError as exc:
            self.problem = str(exc)
            return None
        self.problem = ""
        return EngineSettings(**{**self.settings.__dict__, **values})

    def _refuse(self, message: str) -> None:
        # One line in red, and no Load until the fields are fixed.
        self.query_one("#plan", Static).update(f"[red]{message}[/red]")
        self.query_one("#load", Button).disabled = True

    @on(Input.Changed)
    @on(Select.Changed)
    def update_plan(self) -> None:
        from edge_infer.engine import place
        from edge_infer.plan import NO_FIT, verdict

        if self.info is None:  # not read yet, or unreadable (on_mount said why)
            return
        s = self.chosen()
        if s is None:
            self._refuse(self.problem)
            return
        machine = self.machine
        if s.rpc:  # the workers' devices come from asking them (a thread: a far one may be slow)
            machine = self.with_workers.get(s.rpc)
            if machine is None:
                self._refuse(f"asking {', '.join(s.rpc)} for their devices…")
                self.ask_workers(s.rpc)
                return
            if isinstance(machine, str):
                self._refuse(machine)
                return
        try:  # a pool too small for llama.cpp, or layers a device cannot hold, are only known here
            placement = place(self.info, s, machine, warn=False)
        except EdgeInferError as exc:
            self._refuse(str(exc))
            return
        est = placement.plan.estimate
        self.query_one("#load", Button).disabled = False
        free = psutil.virtual_memory().available
        fit = verdict(est.cpu_bytes, free)  # the same rule as the installed table's verdicts (GPU bytes are not RAM)
        fit = f"[red]{fit}[/red]" if fit == NO_FIT else fit
        warn = "" if s.ctx <= self.info.context_length else \
            f"\n[yellow]trained context is {self.info.context_length}: quality may drop beyond it[/yellow]"
        self.query_one("#plan", Static).update(
            f"memory plan: weights {est.weights_bytes / MiB:.0f} MiB + KV {est.kv_bytes / MiB:.0f} MiB "
            f"+ compute {est.compute_resident_bytes / MiB:.0f} MiB + runtime {est.runtime_bytes / MiB:.0f} MiB "
            f"+ prompt cache cap {est.prompt_cache_bytes / MiB:.0f} MiB = [b]{est.total_bytes / MiB:.0f} MiB[/b] "
            f"({free / MiB:.0f} MiB available: {fit})\n"
            f"KV pool {est.n_ctx} cells, {est.kv_bytes / MiB:.0f} MiB (K {s.cache_type_k}, V {s.cache_type_v})\n"
            f"where: {placement.describe()}{warn}")

    @work(thread=True, exclusive=True, group="workers")
    def ask_workers(self, workers: tuple[str, ...]) -> None:
        from edge_infer.engine import this_machine

        try:
            found = this_machine(workers)
        except EdgeInferError as exc:
            found = str(exc)
        self.app.call_from_thread(self._asked, workers, found)

    def _asked(self, workers: tuple[str, ...], found) -> None:
        self.with_workers[workers] = found
        self.update_plan()

    @on(Button.Pressed)
    def done(self, event: Button.Pressed) -> None:
        if event.button.id == "cancel":
            self.dismiss(None)
            return
        s = self.chosen()
        if s is None or self.query_one("#load", Button).disabled:
            self.notify(self.problem or "Fix the settings first.", severity="error")
            return
        self.dismiss(s)
