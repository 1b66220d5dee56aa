"""Counters and rates. Snapshots are plain frozen objects any thread may read."""

from __future__ import annotations

import time
from collections import deque
from dataclasses import asdict, dataclass, field

from edge_infer.chat.reply import FinishReason


def decode_rate(n_tokens: int, first_at: float, end_at: float) -> float:
    """Tokens per second after the first one (which comes from prefill)."""
    return (n_tokens - 1) / (end_at - first_at) if n_tokens > 1 and end_at > first_at else 0.0


@dataclass
class RequestStats:
    prompt_tokens: int = 0
    cached_tokens: int = 0         # prompt tokens reused from the KV cache (not evaluated)
    generated_tokens: int = 0      # set when the request finishes (live: len(seq.generated))
    queued_at: float = 0.0
    started_at: float = 0.0        # got a slot
    first_token_at: float = 0.0
    finished_at: float = 0.0

    @property
    def prompt_eval_tokens(self) -> int:
        """Prompt tokens actually evaluated."""
        return self.prompt_tokens - self.cached_tokens

    @property
    def ttft_s(self) -> float:
        return self.first_token_at - self.queued_at if self.first_token_at else 0.0

    @property
    def prefill_tok_s(self) -> float:
        dt = self.first_token_at - self.started_at
        return self.prompt_eval_tokens / dt if self.first_token_at and dt > 0 else 0.0

    @property
    def decode_tok_s(self) -> float:
        return decode_rate(self.generated_tokens, self.first_token_at, self.finished_at)


@dataclass(frozen=True)
class RequestSnapshot:
    id: str
    source: str
    state: str          # queued | prefill | decode
    slot: int
    prompt_tokens: int
    cached_tokens: int
    generated_tokens: int
    decode_tok_s: float


@dataclass(frozen=True)
class DeviceMemory:
    """One llama.cpp device of a loaded model: what llama.cpp allocated there at load (its
    buffer report), what the plan said, and the device's free and total memory now."""
    device: str              # "CPU", "Vulkan0", "CUDA0"
    kind: str                # cpu | gpu | igpu | remote
    layers: int              # layer slots placed there (repeating layers + output)
    model_bytes: int
    kv_bytes: int
    compute_bytes: int
    planned_bytes: int
    free_bytes: int = 0
    total_bytes: int = 0

    @property
    def allocated_bytes(self) -> int:
        return self.model_bytes + self.kv_bytes + self.compute_bytes


@dataclass(frozen=True)
class EngineSnapshot:
    model: str
    n_slots: int
    slots_busy: int
    running: int
    queued: int
    kv_cells_used: int
    kv_cells_total: int
    rss_bytes: int
    weights_bytes: int
    kv_bytes: int
    requests_total: int
    prompt_tokens_total: int
    prompt_eval_tokens_total: int
    generated_tokens_total: int
    decode_tok_s: float        # aggregate, over the last few seconds
    prefill_tok_s: float
    ttft_p50_s: float          # over the last 100 requests
    ttft_p95_s: float
    requests: tuple[RequestSnapshot, ...] = field(default_factory=tuple)
    # The shared KV pool and the RAM prompt cache (engine/kv/pool.py, kv/ram_tier.py)
    kv_preemptions_total: int = 0       # running requests taken off their slot for room
    kv_evictions_total: int = 0         # idle slots' leftovers dropped for room
    prompt_cache_entries: int = 0
    prompt_cache_bytes: int = 0
    prompt_cache_cap_bytes: int = 0
    prompt_cache_hits_total: int = 0
    prompt_cache_misses_total: int = 0
    prompt_cache_evictions_total: int = 0
    prompt_cache_restored_tokens_total: int = 0  # tokens restored instead of evaluated
    # Its disk tier (engine/kv/disk_tier.py): the folder's bytes (every model's) and this model's files
    disk_cache_entries: int = 0
    disk_cache_bytes: int = 0
    disk_cache_cap_bytes: int = 0       # 0: off
    disk_cache_hits_total: int = 0
    disk_cache_writes_total: int = 0
    disk_cache_evictions_total: int = 0
    disk_cache_rejected_total: int = 0  # corrupt, truncated or stale files deleted unread
    disk_cache_restored_tokens_total: int = 0
    disk_cache_restored_bytes_total: int = 0
    disk_cache_restore_seconds_total: float = 0.0  # reading, checking and restoring them
    disk_cache_off_reason: str = ""     # why the tier is off ("" while it works)
    disk_cache_folder: str = ""
    # The CPU threadpool's poll now (0 while other programs keep cores busy) and their load in
    # cores (engine/cpu_share.py)
    poll: int = 0
    other_load_cores: float = 0.0
    cpu_verdict: str = ""   # the CPU governor's last trial: what it kept and each candidate's step time
    threads: int = 0              # CPU threads decoding now (fewer while other programs are busy)
    # n-gram speculation (engine/speculation.py)
    draft_max: int = 0                  # the server's default drafted tokens per step (0 = off)
    draft_tokens_total: int = 0
    draft_accepted_total: int = 0
    devices: tuple[DeviceMemory, ...] = ()  # where the model lives, the CPU first

    @property
    def draft_acceptance(self) -> float:
        """Share of drafted tokens the model confirmed (0 before any draft)."""
        return self.draft_accepted_total / self.draft_tokens_total if self.draft_tokens_total else 0.0

    def to_dict(self) -> dict:
        return asdict(self) | {"draft_acceptance": round(self.draft_acceptance, 4)}


def percentile(values, q: float) -> float:
    values = sorted(values)
    if not values:
        return 0.0
    k = (len(values) - 1) * q
    lo = int(k)
    hi = min(lo + 1, len(values) - 1)
    return values[lo] + (values[hi] - values[lo]) * (k - lo)


class RateMeter:
    """Tokens per second over a sliding window, fed by the engine thread."""

    def __init__(self, window_s: float = 5.0):
        self.window_s = window_s
        self._events: deque[tuple[float, int]] = deque()

    def add(self, n: int, now: float | None = None) -> None:
        now = time.perf_counter() if now is None else now
        self._events.append((now, n))
        self._trim(now)

    def rate(self, now: float | None = None) -> float:
        now = time.perf_counter() if now is None else now
        self._trim(now)
        events = list(self._events)
        if not events:
            return 0.0
        span = max(now - events[0][0], 1e-3)
        return sum(n for _, n in events) / max(span, min(self.window_s, 1.0))

    def _trim(self, now: float) -> None:
        while self._events and now - self._events[0][0] > self.window_s:
            self._events.popleft()


@dataclass
class EngineStats:
    """Totals since the engine started, the TTFT window and the token rates.

    Only the engine thread writes it; snapshot() reads it from any thread (ints are read
    whole, the window is copied first), so a reading may be a step old but never torn.
    """
    requests: int = 0             # taken from the inbox
    prompt_tokens: int = 0        # of requests that got a slot
    prompt_eval_tokens: int = 0   # of those, evaluated (not reused from the KV cache)
    generated_tokens: int = 0
    draft_tokens: int = 0         # n-gram speculation: tokens drafted and verified
    draft_accepted: int = 0       # of those, the ones the model confirmed
    ttfts: deque[float] = field(default_factory=lambda: deque(maxlen=100))  # seconds, newest last
    decode_rate: RateMeter = field(default_factory=RateMeter)
    prefill_rate: RateMeter = field(default_factory=RateMeter)

    def started(self, prompt_tokens: int, cached_tokens: int) -> None:
        self.prompt_tokens += prompt_tokens
        self.prompt_eval_tokens += prompt_tokens - cached_tokens

    def first_token(self, request: RequestStats, now: float) -> None:
        """Time a request's first token, once: into its own stats and the TTFT window."""
        if not request.first_token_at:
            request.first_token_at = now
            self.ttfts.append(request.ttft_s)

    def stepped(self, n_prefill: int, n_decode: int, now: float) -> None:
        """Tokens one decode evaluated: prompt tokens, and one per generating sequence."""
        if n_prefill:
            self.prefill_rate.add(n_prefill, now)
        if n_decode:
            self.decode_rate.add(n_decode, now)

    def ttft_percentile(self, q: float) -> float:
        return percentile(list(self.ttfts), q)


@dataclass(frozen=True)
class FinishedRequest:
    """One line of the engine's recent history (the Server tab's request log reads it)."""
    id: str
    source: str
    reason: FinishReason
    prompt_tokens: int
    cached_tokens: int
    generated_tokens: int
    ttft_s: float
    decode_tok_s: float
    finished_at: float  # time.time()

    @classmethod
    def of(cls, request_id: str, source: str, reason: FinishReason, st: RequestStats) -> "FinishedRequest":
        return cls(request_id, source, reason, st.prompt_tokens, st.cached_tokens, st.generated_tokens,
                   st.ttft_s, st.decode_tok_s, time.time())
