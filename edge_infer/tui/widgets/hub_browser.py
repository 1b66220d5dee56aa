"""Hub: search GGUF repos, list a repo's quant levels with sizes and fit verdicts.

Every hub call runs in a thread worker (the fit verdicts read each model's GGUF header
with HTTP range requests: nothing is downloaded). Errors are notifications. Choosing a
level to download posts DownloadRequested upward: the Models pane owns the download.
"""

from __future__ import annotations

from textual import on, work
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.message import Message
from textual.widget import Widget
from textual.widgets import Button, DataTable, Input, Static

from edge_infer.config import EngineSettings
from edge_infer.units import human_bytes


class HubBrowser(Widget):
    class DownloadRequested(Message):
        def __init__(self, repo: str, quant: str, size: int) -> None:
            super().__init__()
            self.repo, self.quant, self.size = repo, quant, size

    def __init__(self, settings: EngineSettings, **kwargs) -> None:
        super().__init__(**kwargs)
        self.settings = settings  # the app's defaults: the levels' fit verdicts are for them
        self.results: list = []
        self.levels: list = []      # LevelFit, in table order
        self.repo: str | None = None

    def compose(self) -> ComposeResult:
        with Horizontal(id="hub-bar"):
            yield Input(placeholder="search GGUF repos on the hub, e.g. smollm2", id="hub-query")
            yield Button("Search", id="hub-search")
        results = DataTable(id="hub-results", cursor_type="row")
        results.add_columns("repo", "downloads", "likes", "updated")
        yield results
        yield Static("Pick a repo to see its quant levels.", id="hub-status", classes="hint")
        quants = DataTable(id="hub-quants", cursor_type="row")
        quants.add_columns("quant", "size", "bpw", "RAM need", "fit", "file")
        yield quants
        with Horizontal(classes="buttons"):
            yield Button("Download", variant="primary", id="hub-download", disabled=True)

    # -- search ----------------------------------------------------------------------

    @on(Input.Submitted, "#hub-query")
    @on(Button.Pressed, "#hub-search")
    def _search(self) -> None:
        query = self.query_one("#hub-query", Input).value.strip()
        if query:
            self.query_one("#hub-status", Static).update(f"searching {query!r}…")
            self.search(query)

    @work(thread=True, exclusive=True, group="hub-search")
    def search(self, query: str) -> None:
        from edge_infer.store.hub import HubClient

        try:
            found = HubClient().search(query, limit=30)
        except Exception as exc:  # hub unreachable, HTTP errors: a notification, never a traceback
            self.app.call_from_thread(self._failed, "Hub search failed", exc)
            return
        self.app.call_from_thread(self._show_results, query, found)

    def _show_results(self, query: str, found: list) -> None:
        self.results = found
        table = self.query_one("#hub-results", DataTable)
        table.clear()
        for r in found:
            table.add_row(r.repo, "?" if r.downloads is None else f"{r.downloads:,}",
                          "?" if r.likes is None else str(r.likes), r.updated or "?", key=r.repo)
        self.query_one("#hub-status", Static).update(
            f"{len(found)} repos match {query!r}: pick one (Enter) to list its quant levels." if found
            else f"no GGUF repos match {query!r}")
        if found:
            table.focus()

    def _failed(self, title: str, exc: Exception) -> None:
        self.query_one("#hub-status", Static).update(f"[red]{title}[/red]")
        self.notify(str(exc) or type(exc).__name__, title=title, severity="error", timeout=10)

    # -- quant levels ------------------------------------------------------------------

    @on(DataTable.RowSelected, "#hub-results")
    def _repo_chosen(self, event: DataTable.RowSelected) -> None:
        self.show_repo(str(event.row_key.value))

    def show_repo(self, repo: str) -> None:
        self.repo = repo
        self.query_one("#hub-quants", DataTable).clear()
        self.query_one("#hub-download", Button).disabled = True
        self.query_one("#hub-status", Static).update(f"reading {repo}'s GGUF headers…")
        self.list_levels(repo)

    @work(thread=True, exclusive=True, group="hub-quants")
    def list_levels(self, repo: str) -> None:
        from edge_infer.engine import this_machine
        from edge_infer.plan import engine_estimate_kwargs
        from edge_infer.store.hub import HubClient
        from edge_infer.store.pull import level_fits

        settings = self.settings
        try:
            client = HubClient()
            listing = client.listing(repo)
            groups = listing.gguf_groups()
            machine = this_machine()
            fits = level_fits(client, listing, groups, machine, settings.ctx, settings.parallel,
                              **engine_estimate_kwargs(settings, machine)) if groups else []
        except Exception as exc:
            self.app.call_from_thread(self._failed, f"Cannot list {repo}", exc)
            return
        self.app.call_from_thread(self._show_levels, repo, fits)

    def _show_levels(self, repo: str, fits: list) -> None:
        if repo != self.repo:
            return
        self.levels = fits
        table = self.query_one("#hub-quants", DataTable)
        table.clear()
        for i, lf in enumerate(fits):
            g = lf.group
            bpw = g.size * 8 / max(1, lf.info.parameter_count)
            more = f" (+{len(g.files) - 1} parts)" if g.split else ""
            table.add_row(g.quant, human_bytes(g.size), f"{bpw:.2f}", human_bytes(lf.fit.ram_need), lf.fit.best,
                          g.first.name + more, key=str(i))
        status = self.query_one("#hub-status", Static)
        if not fits:
            status.update(f"{repo} has no GGUF files")
            return
        ctx = fits[0].fit.ctx
        status.update(f"{repo}: {len(fits)} levels, verdicts at ctx {ctx} × {fits[0].fit.parallel}. "
                      "Pick one and press Download.")
        self.query_one("#hub-download", Button).disabled = False

    @on(DataTable.RowSelected, "#hub-quants")
    @on(Button.Pressed, "#hub-download")
    def _download(self) -> None:
        table = self.query_one("#hub-quants", DataTable)
        if not self.levels or self.repo is None or table.cursor_row is None:
            return
        lf = self.levels[table.cursor_row]
        self.post_message(self.DownloadRequested(self.repo, lf.group.quant, lf.group.size))
