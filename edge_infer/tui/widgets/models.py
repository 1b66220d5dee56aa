"""Models tab: installed models, the hub, the quant ladder; downloads and quantizing.

Thin: the regions are widgets (installed.py, hub_browser.py, ladder_chart.py,
downloads.py) that post messages up here. The pane stays mounted while other tabs show,
so the download and quantize workers it owns keep going when the user switches tabs.
"""

from __future__ import annotations

from textual import on, work
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widget import Widget
from textual.widgets import Label, ProgressBar, TabbedContent, TabPane

from edge_infer.config import EngineSettings
from edge_infer.host import ModelHost
from edge_infer.tui.widgets.downloads import DownloadsPanel, Throttle
from edge_infer.tui.widgets.hub_browser import HubBrowser
from edge_infer.tui.widgets.installed import InstalledModels
from edge_infer.tui.widgets.ladder_chart import LadderChart


class ModelsPane(Widget):
    def __init__(self, host: ModelHost, settings: EngineSettings, **kwargs) -> None:
        super().__init__(**kwargs)
        self.host = host
        self.settings = settings  # the app's defaults: what fit verdicts are for

    def compose(self) -> ComposeResult:
        with TabbedContent(initial="m-installed", id="models-tabs"):
            with TabPane("Installed", id="m-installed"):
                yield InstalledModels(self.host, self.settings, id="installed-models")
            with TabPane("Hub", id="m-hub"):
                yield HubBrowser(self.settings, id="hub-browser")
            with TabPane("Ladder", id="m-ladder"):
                yield LadderChart(id="ladder-chart")
        with Horizontal(id="quantize-status"):
            yield Label("", id="quantize-label")
            yield ProgressBar(total=1, show_eta=False, id="quantize-bar")
        yield DownloadsPanel(id="downloads")

    def on_mount(self) -> None:
        self.query_one("#quantize-status").display = False

    def refresh_models(self) -> None:
        self.query_one(InstalledModels).refresh_models()

    @on(InstalledModels.Selected)
    def _selected(self, event: InstalledModels.Selected) -> None:
        self.query_one(LadderChart).show_model(event.model)

    @on(HubBrowser.DownloadRequested)
    def _download(self, event: HubBrowser.DownloadRequested) -> None:
        self.query_one(DownloadsPanel).start(event.repo, event.quant, event.size)

    @on(DownloadsPanel.Finished)
    def _downloaded(self) -> None:
        self.refresh_models()

    # -- quantize ------------------------------------------------------------------------

    @on(InstalledModels.QuantizeRequested)
    def _quantize(self, event: InstalledModels.QuantizeRequested) -> None:
        if any(w.group == "quantize" and w.is_running for w in self.workers):
            self.notify("A quantization is already running.", severity="warning")
            return
        self.query_one("#quantize-status").display = True
        self._quantize_progress(f"planning {event.model.label}…", 0, 1)
        self.quantize(event.model, event.targets, event.from_f16, event.allow_requantize)

    def _quantize_progress(self, text: str, done: int, total: int) -> None:
        self.query_one("#quantize-label", Label).update(text)
        self.query_one("#quantize-bar", ProgressBar).update(total=max(1, total), progress=done)

    def _quantize_done(self, text: str, severity: str) -> None:
        self.query_one("#quantize-status").display = False
        self.refresh_models()
        self.notify(text, title="Quantize", severity=severity, timeout=10 if severity == "error" else 5)

    @work(thread=True, group="quantize")
    def quantize(self, model, targets: list[str], from_f16: bool, allow_requantize: bool) -> None:
        from edge_infer.engine import quantize_file
        from edge_infer.store.quantize import plan_quantize, run_quantize

        call = self.app.call_from_thread

        def progress(level: str):
            due = Throttle()

            def update(done: int, total: int, name: str) -> None:
                if due(done >= total):
                    call(self._quantize_progress, f"{model.label} → {level}: tensor {done}/{total}", done, total)
            return update

        try:
            plan = plan_quantize(model.label, targets, from_f16=from_f16, allow_requantize=allow_requantize)
            for note in plan.notes:
                call(self.notify, note, title="Quantize", timeout=8)
            made = run_quantize(plan, quantizer=quantize_file, progress=progress, say=lambda m: None)
        except Exception as exc:  # refusals (QuantizeError), llama.cpp failures, disk full
            call(self._quantize_done, str(exc) or type(exc).__name__, "error")
            return
        names = ", ".join(m.label for m in made) or "nothing new"
        skipped = "".join(f"; {m.label} was already installed" for m in plan.skipped)
        call(self._quantize_done, f"Made {names}{skipped}.", "information")

