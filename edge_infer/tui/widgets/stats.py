"""Stats: memory bars, token-rate sparklines, latency, and a row per live request.

Polls Engine.snapshot() twice a second; the snapshot is a plain object, cheap to read.
"""

from __future__ import annotations

from collections import deque

import psutil
from textual.app import ComposeResult
from textual.containers import Grid, Vertical
from textual.widget import Widget
from textual.widgets import DataTable, Label, ProgressBar, Sparkline, Static

from edge_infer.host import ModelHost
from edge_infer.units import MiB

HISTORY = 240  # samples at 2 Hz: the last two minutes


class StatsPane(Widget):
    def __init__(self, host: ModelHost, **kw):
        super().__init__(**kw)
        self.host = host
        self.decode_history: deque[float] = deque([0.0] * HISTORY, maxlen=HISTORY)
        self.prefill_history: deque[float] = deque([0.0] * HISTORY, maxlen=HISTORY)
        self.total_ram = psutil.virtual_memory().total

    def compose(self) -> ComposeResult:
        yield Static(id="stats-model")
        with Grid(id="memory-grid"):
            yield Label("RSS", classes="bar-label")
            yield ProgressBar(id="rss-bar", show_eta=False, show_percentage=False)
            yield Label(id="rss-text")
            yield Label("weights", classes="bar-label")
            yield ProgressBar(id="weights-bar", show_eta=False, show_percentage=False)
            yield Label(id="weights-text")
            yield Label("KV pool", classes="bar-label")
            yield ProgressBar(id="kv-bar", show_eta=False, show_percentage=False)
            yield Label(id="kv-text")
            yield Label("prompt cache", classes="bar-label")
            yield ProgressBar(id="cache-bar", show_eta=False, show_percentage=False)
            yield Label(id="cache-text")
            yield Label("disk cache", classes="bar-label")
            yield ProgressBar(id="disk-bar", show_eta=False, show_percentage=False)
            yield Label(id="disk-text")
        with Vertical(classes="spark-box"):
            yield Label(id="decode-label")
            yield Sparkline(list(self.decode_history), id="decode-spark")
            yield Label(id="prefill-label")
            yield Sparkline(list(self.prefill_history), id="prefill-spark")
        yield Static(id="latency")
        yield Static(id="remotes")
        table = DataTable(id="requests", cursor_type="none")
        table.add_columns("request", "source", "slot", "state", "prompt", "reused", "generated", "tok/s")
        yield table

    def on_mount(self) -> None:
        self.refresh_stats()
        self.poller = self.set_interval(0.5, self.refresh_stats)

    def refresh_stats(self) -> None:
        remotes = self.query_one("#remotes", Static)
        remotes.update(text := remotes_text(self.host.remotes.listing()))
        remotes.display = bool(text)  # no remote models: no line
        loaded = self.host.current
        engine = loaded.engine if loaded else None
        if engine is None:
            self.query_one("#stats-model", Static).update("No model loaded.")
            return
        snap = engine.snapshot()
        self.decode_history.append(snap.decode_tok_s)
        self.prefill_history.append(snap.prefill_tok_s)
        backend = engine.backend
        self.query_one("#stats-model", Static).update(
            f"[b]{self.host.description}[/b]" + (f"\n{backend.summary()}" if backend else "")
            + _devices_text(snap))
        self._bar("rss", snap.rss_bytes, self.total_ram, f"{snap.rss_bytes / MiB:.0f} MiB of {self.total_ram / MiB:.0f} MiB RAM")
        self._bar("weights", snap.weights_bytes, max(snap.rss_bytes, 1), f"{snap.weights_bytes / MiB:.0f} MiB")
        self._bar("kv", snap.kv_cells_used, snap.kv_cells_total,
                  f"{snap.kv_cells_used} / {snap.kv_cells_total} cells · {snap.kv_bytes / MiB:.0f} MiB allocated"
                  f" · {snap.kv_preemptions_total} preempted")
        self._bar("cache", snap.prompt_cache_bytes, snap.prompt_cache_cap_bytes,
                  f"{snap.prompt_cache_bytes / MiB:.0f} / {snap.prompt_cache_cap_bytes / MiB:.0f} MiB · "
                  f"{snap.prompt_cache_entries} saved · {snap.prompt_cache_hits_total} hits, "
                  f"{snap.prompt_cache_misses_total} misses")
        self._bar("disk", snap.disk_cache_bytes, snap.disk_cache_cap_bytes, _disk_text(snap))
        self.query_one("#decode-spark", Sparkline).data = list(self.decode_history)
        self.query_one("#prefill-spark", Sparkline).data = list(self.prefill_history)
        self.query_one("#decode-label", Label).update(
            f"decode {snap.decode_tok_s:.1f} tok/s (peak {max(self.decode_history):.0f}, last 2 min)")
        self.query_one("#prefill-label", Label).update(
            f"prefill {snap.prefill_tok_s:.1f} tok/s (peak {max(self.prefill_history):.0f})")
        self.query_one("#latency", Static).update(
            f"TTFT p50 {snap.ttft_p50_s * 1000:.0f} ms · p95 {snap.ttft_p95_s * 1000:.0f} ms   "
            f"running {snap.running} · queued {snap.queued} · slots {snap.slots_busy}/{snap.n_slots}   "
            f"requests {snap.requests_total} · generated {snap.generated_tokens_total} tokens"
            + (f"   machine busy ({snap.other_load_cores:.1f} cores used by other programs): decoding on "
               f"{snap.threads} thread{'s' * (snap.threads != 1)}, CPU workers "
               f"{'spin' if snap.poll else 'sleep instead of spinning'} (the fastest in a trial)"
               if snap.other_load_cores > 0.5 else "")
            + _speculation_text(snap))
        table = self.query_one("#requests", DataTable)
        table.clear()
        for r in snap.requests:
            table.add_row(r.id, r.source, str(r.slot) if r.slot >= 0 else "-", r.state, str(r.prompt_tokens),
                          str(r.cached_tokens), str(r.generated_tokens), f"{r.decode_tok_s:.1f}")

    def _bar(self, name: str, value: int, total: int, text: str) -> None:
        self.query_one(f"#{name}-bar", ProgressBar).update(total=max(total, 1), progress=value)
        self.query_one(f"#{name}-text", Label).update(text)


def remotes_text(remotes: list[dict]) -> str:
    """A line per server of each remote model: up or out, in flight, requests, errors, latency."""
    lines = []
    for m in remotes:
        for u in m["upstreams"]:
            p50 = f" · p50 {u['latency_p50_ms']:.0f} ms" if u["latency_p50_ms"] is not None else ""
            state = "up" if u["up"] else f"[b]out[/b] ({u['last_error']})"
            lines.append(f"remote {m['name']} · {u['url']}: {state} · {u['in_flight']} in flight · "
                         f"{u['requests']} requests · {u['errors']} errors{p50}")
    return "\n".join(lines)


def _speculation_text(snap) -> str:
    """Shown once drafts have run (speculation is on by default, and drafts only where they pay:
    plain chat may draft nothing, which needs no line)."""
    if not snap.draft_tokens_total:
        return ""
    return (f"\nn-gram drafts: {snap.draft_acceptance:.0%} accepted "
            f"({snap.draft_accepted_total} of {snap.draft_tokens_total} tokens)")


def _devices_text(snap) -> str:
    """Each GPU device holding layers: layers, llama.cpp's buffers there, its free memory.
    Nothing when the model runs on the CPU alone."""
    gpus = [d for d in snap.devices if d.device != "CPU" and d.layers]
    if not gpus:
        return ""
    parts = [f"{d.device}: {d.layers} layers, {d.allocated_bytes / MiB:.0f} MiB"
             + (f" ({d.free_bytes / MiB:.0f} of {d.total_bytes / MiB:.0f} MiB free)" if d.total_bytes else "")
             for d in gpus]
    cpu = next((d for d in snap.devices if d.device == "CPU"), None)
    if cpu is not None:
        parts.insert(0, f"CPU: {cpu.layers} layers")
    return "\n" + " · ".join(parts)


def _disk_text(snap) -> str:
    if snap.disk_cache_off_reason:
        return snap.disk_cache_off_reason
    return (f"{snap.disk_cache_bytes / MiB:.0f} / {snap.disk_cache_cap_bytes / MiB:.0f} MiB · "
            f"{snap.disk_cache_entries} saved · {snap.disk_cache_hits_total} restored "
            f"({snap.disk_cache_restored_tokens_total} tokens)")
