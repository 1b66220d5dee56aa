"""Build an EngineSnapshot from a running engine, from any thread.

Reads engine-thread state without stopping it, through the engine's public surface
(scheduler, live_sequences(), stats): lists are copied first (atomic in CPython), so a
snapshot may be a step old but is never torn.
"""

from __future__ import annotations

import functools
import time
import psutil

from edge_infer.engine.devices.devices import list_devices
from edge_infer.engine.devices.placement import Placement
from edge_infer.engine.sequence import Sequence, Status
from edge_infer.engine.stats import DeviceMemory, EngineSnapshot, RequestSnapshot, decode_rate


def build_snapshot(engine) -> EngineSnapshot:
    """`engine`: an Engine (not imported here: it imports this module)."""
    sched, stats = engine.scheduler, engine.stats
    tiers = engine.kv.tiers
    mem, cache, disk = engine.kv.counters, tiers.ram.counters(), tiers.disk.counters
    running, waiting = list(sched.running), list(sched.waiting)
    # Submitted, not yet taken from the inbox by the engine thread.
    inbox_only = [s for s in engine.live_sequences() if s.status is Status.WAITING and s not in waiting]
    reqs = tuple(RequestSnapshot(
        id=s.id, source=s.request.source, state=s.status.value, slot=s.slot,
        prompt_tokens=len(s.prompt), cached_tokens=s.stats.cached_tokens,
        generated_tokens=len(s.generated), decode_tok_s=round(_live_rate(s), 1))
        for s in running + waiting + inbox_only)
    return EngineSnapshot(
        model=engine.name, n_slots=len(sched.slots),
        slots_busy=sum(1 for sl in sched.slots if sl.seq is not None),
        running=len(running), queued=len(waiting) + len(inbox_only),
        kv_cells_used=engine.kv.cells_in_use(),
        kv_cells_total=engine.ctx.n_ctx, rss_bytes=_rss_bytes(), weights_bytes=engine.model.size_bytes,
        kv_bytes=engine.kv_bytes, requests_total=stats.requests,
        prompt_tokens_total=stats.prompt_tokens, prompt_eval_tokens_total=stats.prompt_eval_tokens,
        generated_tokens_total=stats.generated_tokens,
        decode_tok_s=round(stats.decode_rate.rate(), 1), prefill_tok_s=round(stats.prefill_rate.rate(), 1),
        ttft_p50_s=stats.ttft_percentile(0.5), ttft_p95_s=stats.ttft_percentile(0.95),
        requests=reqs, kv_preemptions_total=sched.preemptions, kv_evictions_total=mem.evictions,
        prompt_cache_entries=cache.entries, prompt_cache_bytes=cache.bytes,
        prompt_cache_cap_bytes=tiers.ram.cap_bytes, prompt_cache_hits_total=cache.hits,
        prompt_cache_misses_total=cache.misses, prompt_cache_evictions_total=cache.evictions,
        prompt_cache_restored_tokens_total=mem.restored_tokens,
        disk_cache_entries=disk.entries, disk_cache_bytes=disk.bytes,
        disk_cache_cap_bytes=disk.cap_bytes if not disk.off_reason else 0, disk_cache_hits_total=disk.hits,
        disk_cache_writes_total=disk.writes, disk_cache_evictions_total=disk.evictions,
        disk_cache_rejected_total=disk.rejected, disk_cache_restored_tokens_total=mem.restored_from_disk,
        disk_cache_restored_bytes_total=disk.restored_bytes, disk_cache_restore_seconds_total=disk.restore_seconds,
        disk_cache_off_reason=disk.off_reason, disk_cache_folder=str(tiers.disk.folder),
        poll=engine.runner.spin.poll, other_load_cores=round(engine.runner.spin.others, 2),
        threads=engine.runner.spin.threads, cpu_verdict=engine.runner.spin.verdict,
        draft_max=engine.speculation.default_max if engine.speculation.supported else 0,
        draft_tokens_total=stats.draft_tokens, draft_accepted_total=stats.draft_accepted,
        devices=device_memory(engine.placement, engine.buffers))


@functools.cache
def _this_process() -> psutil.Process:
    return psutil.Process()


def _rss_bytes() -> int:
    try:
        return _this_process().memory_info().rss
    except psutil.Error:
        return 0


def _live_rate(seq: Sequence) -> float:
    st = seq.stats
    if not st.first_token_at:
        return 0.0
    return decode_rate(len(seq.generated), st.first_token_at, time.perf_counter())


def device_memory(placement: Placement, buffers: dict[str, dict[str, int]]):
    """DeviceMemory rows for a loaded model, the CPU first: llama.cpp's buffers by device
    (load_report.device_buffers of its load log), the plan's bytes and layers, and each
    device's memory now."""
    now = {d.name: d for d in list_devices(gpus=False)}  # a model with layers on a GPU loaded its plug-in
    rows = []
    for name, layers, planned in placement.plan.placement():
        dev = now.get(name)
        got = buffers.get(name) or (buffers.get(f"rpc:{dev.description}", {}) if dev else {})
        rows.append(DeviceMemory(
            device=name, kind=dev.kind if dev else ("cpu" if name == "CPU" else "gpu"), layers=layers,
            model_bytes=got.get("model", 0), kv_bytes=got.get("KV", 0) + got.get("RS", 0),
            compute_bytes=got.get("compute", 0), planned_bytes=planned,
            free_bytes=dev.free_bytes if dev else 0, total_bytes=dev.total_bytes if dev else 0))
    return tuple(rows)
