"""Downloads: one row per hub download with a progress bar, bytes, speed and ETA.

The pull runs in a thread worker of this panel, which lives in the Models pane (mounted
for the app's whole life: switching tabs never stops a download). The store keeps the
partial file, so a download cut by quitting shows up again at the next start with a
Resume button; resuming is the same pull, which continues from the partial bytes. Stop
pauses a running download the same way; Discard deletes a paused one's bytes.
"""

from __future__ import annotations

import time

from textual import on, work
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.widget import Widget
from textual.widgets import Button, Label, ProgressBar, Static
from textual.worker import get_current_worker

from edge_infer.units import RateMeter, human_bytes, human_duration, human_rate


class _Cancelled(Exception):
    """Raised from the progress callback to stop a pull when its worker is cancelled
    (the app quits): the partial file stays for a later resume."""


class Throttle:
    """For progress from a worker thread: yes at most every `interval` seconds, and always
    for the final update (each yes is a call onto the UI thread)."""

    def __init__(self, interval: float = 0.1):
        self.interval, self.last = interval, 0.0

    def __call__(self, final: bool) -> bool:
        now = time.monotonic()
        if final or now - self.last >= self.interval:
            self.last = now
            return True
        return False


class DownloadRow(Vertical):
    def __init__(self, repo: str, quant: str, have: int = 0, total: int = 0, resumable: bool = False):
        super().__init__(classes="download")
        self.repo, self.quant = repo, quant
        self.have, self.total, self.part = have, total, ""
        self.state = "paused" if resumable else "starting"
        self.meter = RateMeter(window=5.0)   # speed of this part over the last seconds
        self.worker = None            # the pull running for this row, if any
        self.stop_requested = False   # Stop pressed (not the app quitting)

    @property
    def spec(self) -> str:
        return f"{self.repo}:{self.quant}"

    def compose(self) -> ComposeResult:
        with Horizontal(classes="download-head"):
            yield Label(self.spec, classes="download-name")
            yield ProgressBar(total=max(1, self.total), show_eta=False, classes="download-bar")
            yield Button("Stop", classes="download-stop", compact=True)
            yield Button("Resume", classes="download-resume", compact=True)
            yield Button("Discard", classes="download-discard", compact=True)
        yield Static(classes="download-status")

    def on_mount(self) -> None:
        self.query_one(ProgressBar).update(progress=self.have)
        self._buttons()
        self.show("interrupted: " + self._bytes() + " kept; Resume continues" if self.state == "paused" else "starting…")

    def _buttons(self) -> None:
        paused = self.state == "paused"
        self.query_one(".download-stop", Button).display = self.state in ("starting", "running")
        self.query_one(".download-resume", Button).display = paused
        self.query_one(".download-discard", Button).display = paused

    def _bytes(self) -> str:
        return f"{human_bytes(self.have)} / {human_bytes(self.total)}"

    def show(self, text: str) -> None:
        self.query_one(".download-status", Static).update(text)

    def progress(self, part: str, have: int, total: int) -> None:
        if part != self.part:
            self.part = part
            self.meter.clear()
        self.meter.add(time.monotonic(), have)
        if self.state != "running":
            self.state = "running"
            self._buttons()
        self.have, self.total = have, total
        self.query_one(ProgressBar).update(total=max(1, total), progress=have)
        self.show(f"{part}: {self._bytes()}  {human_rate(self.meter.rate())}  ETA {human_duration(self.meter.eta(total))}")

    def stopped(self, text: str, resumable: bool) -> None:
        self.state = "paused" if resumable else "done"
        self.worker = None
        self._buttons()
        self.show(text)


class DownloadsPanel(Widget):
    class Finished(Message):
        def __init__(self, label: str) -> None:
            super().__init__()
            self.label = label

    def compose(self) -> ComposeResult:
        yield Label("Downloads", classes="section")

    def on_mount(self) -> None:
        self.display = False
        self.list_unfinished()

    def rows(self) -> list[DownloadRow]:
        return list(self.query(DownloadRow))

    def row(self, repo: str, quant: str) -> DownloadRow | None:
        return next((r for r in self.rows() if r.spec == f"{repo}:{quant}"), None)

    @staticmethod
    def _partials():
        """(partial download, its quant level) for every download the store holds unfinished."""
        from edge_infer.store.partials import list_partials
        from edge_infer.gguf.quant_types import quant_from_filename
        from edge_infer.store.store import ModelStore

        return [(p, quant_from_filename(p.path)) for p in list_partials(ModelStore().root)]

    def list_unfinished(self) -> None:
        """Partial downloads left by an earlier run (or a failed one): one Resume row each."""
        for p, quant in self._partials():
            if not p.repo or not quant:
                continue
            row = self.row(p.repo, quant)
            if row is None:
                self.mount(DownloadRow(p.repo, quant, p.have, p.size, resumable=True))
            elif row.state == "paused":
                row.have += p.have
                row.total += p.size
        self.display = bool(self.rows())

    def start(self, repo: str, quant: str, size: int = 0) -> None:
        row = self.row(repo, quant)
        if row is not None and row.state in ("starting", "running"):
            self.notify(f"{repo}:{quant} is already downloading.", severity="warning")
            return
        self.display = True
        if row is None:
            row = DownloadRow(repo, quant, 0, size)
            self.mount(row)
            self.call_after_refresh(self._pull, row)  # once the row is composed
        else:
            row.state = "starting"
            row.show("starting…")
            self._pull(row)

    def _pull(self, row: DownloadRow) -> None:
        row.stop_requested = False
        row._buttons()
        row.worker = self.pull(row)

    @on(Button.Pressed, ".download-resume")
    def _resume(self, event: Button.Pressed) -> None:
        event.stop()
        row = self._row_of(event.button)
        self.start(row.repo, row.quant)

    @on(Button.Pressed, ".download-stop")
    def _stop(self, event: Button.Pressed) -> None:
        """The worker stops at its next chunk and keeps the bytes it has (see pull)."""
        event.stop()
        row = self._row_of(event.button)
        if row.worker is not None:
            row.stop_requested = True
            row.worker.cancel()
            event.button.display = False
            row.show("stopping…")

    @on(Button.Pressed, ".download-discard")
    def _discard(self, event: Button.Pressed) -> None:
        from edge_infer.store.download import DownloadError
        from edge_infer.store.partials import discard_partial

        event.stop()
        row = self._row_of(event.button)
        try:
            for p, quant in self._partials():
                if p.repo == row.repo and quant == row.quant:
                    discard_partial(p)
        except (DownloadError, OSError) as exc:
            self.notify(str(exc), title=f"Could not discard {row.spec}", severity="error")
            return
        self.notify(f"Discarded the partial download of {row.spec}.")
        row.remove()
        self.call_after_refresh(lambda: setattr(self, "display", bool(self.rows())))

    @staticmethod
    def _row_of(button: Button) -> DownloadRow:
        return next(a for a in button.ancestors if isinstance(a, DownloadRow))

    @work(thread=True, group="downloads")
    def pull(self, row: DownloadRow) -> None:
        from edge_infer.store.pull import Puller

        worker = get_current_worker()
        call = self.app.call_from_thread

        def progress(label: str, have: int, total: int):
            due = Throttle()

            def update(have: int, total: int) -> None:
                if worker.is_cancelled:
                    raise _Cancelled()
                if due(have >= total):
                    call(row.progress, label, have, total)

            update(have, total)
            return update

        try:
            result = Puller(progress=progress, say=lambda m: None).pull(row.spec)
        except _Cancelled:
            if row.stop_requested:  # Stop pressed; when the app quits there is no UI to tell
                call(row.stopped, f"stopped: {human_bytes(row.have)} kept; Resume continues", True)
            return
        except Exception as exc:  # network, disk, checksum: say so, keep the partial
            if not worker.is_cancelled:
                call(row.stopped, f"[red]failed:[/red] {exc}", True)
                call(self.notify, str(exc) or type(exc).__name__, title=f"Download of {row.spec} failed",
                     severity="error", timeout=10)
            return
        label = result.model.label
        text = f"{label} was already installed" if result.already else f"installed {label} ({human_bytes(result.model.size)})"
        # Tell the Models pane first, so the installed table lists the model by the time the
        # row says done (both messages are handled in order on the UI thread).
        call(self.post_message, self.Finished(label))
        call(self.call_after_refresh, row.stopped, "[green]✓[/green] " + text, False)
        call(self.notify, text.capitalize() if result.already else text.replace("installed", "Installed", 1))
        call(self.set_timer, 8.0, lambda: self._forget(row))

    def _forget(self, row: DownloadRow) -> None:
        if row.state == "done" and row.is_mounted:
            row.remove()
            self.call_after_refresh(lambda: setattr(self, "display", bool(self.rows())))
