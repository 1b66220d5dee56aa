"""The quant ladder of the selected model (saved by `edge-infer ladder`): a table and bars
of file size, decode tok/s and perplexity per level, scaled to the largest value."""

from __future__ import annotations

import json

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widget import Widget
from textual.widgets import DataTable, Static

from edge_infer.units import human_bytes

BAR = 18
METRICS = [("size", "file_size", "blue", human_bytes), ("decode tok/s", "decode_tok_s", "green", lambda v: f"{v:.1f}"),
           ("perplexity", "perplexity", "yellow", lambda v: f"{v:.2f}")]


def load_ladder(family: str) -> dict | None:
    from edge_infer.bench.ladder import ladder_path

    path = ladder_path(family)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if data.get("rows") else None


def bars(rows: list[dict]) -> Table:
    """One line per level: three bars (size, decode speed, perplexity) side by side."""
    grid = Table.grid(padding=(0, 1))
    grid.add_column("quant", no_wrap=True)
    for title, *_ in METRICS:
        grid.add_column(title, no_wrap=True)
    grid.add_row("", *[Text(title, style="bold") for title, *_ in METRICS])
    peaks = {key: max((r.get(key) or 0) for r in rows) or 1 for _, key, _, _ in METRICS}
    for r in rows:
        cells = []
        for _, key, color, fmt in METRICS:
            value = r.get(key) or 0
            n = max(1, round(BAR * value / peaks[key])) if value else 0
            cells.append(Text("█" * n, style=color) + Text("░" * (BAR - n), style="dim") + Text(f" {fmt(value)}"))
        grid.add_row(Text(r["quant"], style="bold"), *cells)
    return grid


class LadderChart(Widget):
    def compose(self) -> ComposeResult:
        yield Static("Select an installed model.", id="ladder-title", classes="hint")
        with VerticalScroll(id="ladder-body"):
            table = DataTable(id="ladder-table", cursor_type="none", show_cursor=False)
            table.add_columns("quant", "size", "bpw", "prefill t/s", "decode t/s", "PPL", "KL mean", "top-1")
            yield table
            yield Static(id="ladder-bars")

    def show_model(self, model) -> None:
        title = self.query_one("#ladder-title", Static)
        table = self.query_one("#ladder-table", DataTable)
        table.clear()
        data = load_ladder(model.family) if model is not None else None
        self.query_one("#ladder-body").display = data is not None
        if model is None:
            title.update("Select an installed model.")
            return
        if data is None:
            title.update(f"No ladder saved for {model.family}: `edge-infer ladder {model.label}` measures "
                         "every installed level (quantize more levels first).")
            return
        rows = sorted(data["rows"], key=lambda r: r.get("file_size", 0))
        title.update(f"[b]{data['model']}[/b]: {data.get('n_tokens', '?')} tokens, {data.get('threads', '?')} "
                     f"threads, {data.get('created_at', '')[:16]}")
        for r in rows:
            ref = r.get("reference")
            table.add_row(r["quant"], human_bytes(r["file_size"]), f"{r['bits_per_weight']:.2f}",
                          f"{r['prefill_tok_s']:.0f}", f"{r['decode_tok_s']:.1f}", f"{r['perplexity']:.3f}",
                          "ref" if ref else f"{r.get('kl_mean') or 0:.4f}",
                          "" if ref else f"{100 * (r.get('top1_agree') or 0):.1f}%")
        self.query_one("#ladder-bars", Static).update(bars(rows))
