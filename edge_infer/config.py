"""Engine settings with defaults; EDGE_INFER_* environment variables override defaults,
command-line flags override both. One place."""

from __future__ import annotations

import os
from dataclasses import dataclass, fields, replace

import psutil

from edge_infer.errors import EdgeInferError


def _default_threads() -> int:
    # llama.cpp decode is memory-bound; physical cores beat hyperthreads.
    return max(1, psutil.cpu_count(logical=False) or os.cpu_count() or 1)


# Slots of `serve` and the app when no --parallel is given. A slot costs almost nothing: all
# slots share one KV pool sized apart (plan/kv_pool.py), so more slots only let more requests
# decode together instead of queueing (the youngest is preempted if the pool fills). Agents
# and editors send several requests at once; at 8 clients on 2 cores (SmolLM2) 8 slots gave
# 154 tok/s and TTFT p50 0.42 s where 4 gave 132 tok/s and 1.98 s (half the clients waited).
DEFAULT_SLOTS = 8
MAX_SLOTS = 256  # llama.cpp's LLAMA_MAX_SEQ


def serving_slots_default() -> int | None:
    """The slots of `serve` and the app unless --parallel says: DEFAULT_SLOTS, or None where
    EDGE_INFER_PARALLEL is set (EngineSettings.from_env reads it then)."""
    return None if "EDGE_INFER_PARALLEL" in os.environ else DEFAULT_SLOTS


@dataclass(frozen=True)
class EngineSettings:
    ctx: int = 4096             # context per sequence (tokens a conversation can hold)
    parallel: int = 1           # sequences decoded together (slots)
    n_batch: int = 512          # tokens per llama_decode (decode tokens + prefill chunks)
    n_threads: int = _default_threads()
    # While other programs keep cores busy, the threadpool's workers sleep at once instead of
    # spinning (poll 0), and spin again when they stop (engine/cpu_share.py); off: always `poll`.
    follow_load: bool = True
    # None = as many layers as the GPU devices' memory holds (the plan decides; none without
    # a GPU); 0 = CPU only; -1 = all; N = the last N (engine/devices/placement.py).
    n_gpu_layers: int | None = None
    gpu_memory: str = ""        # at most this much on each GPU device ("6GiB"); "" = what it has free
    # One KV buffer shared by all slots: measured 162 vs 126 tok/s at 8 sequences on
    # SmolLM2 (2 cores). Each sequence is still capped at `ctx` tokens.
    kv_unified: bool = True
    # A persistent CPU threadpool per context with hybrid polling, 0 (sleep at once) ..
    # 100 (spin), as llama-server's --poll; -1 = ggml's throwaway pool per graph
    # (engine/native/threadpool.py).
    poll: int = 50
    swa_full: bool = False      # keep full-size sliding-window caches (more prefix reuse, more memory)
    # "auto" lets llama.cpp use flash attention where the backend supports it. On the
    # 2-core CPU it took SmolLM2 from 106 to 122 tok/s alone and 168 to 203 with 8 sequences.
    flash_attn: str = "auto"    # auto | on | off
    cache_type_k: str = "f16"   # KV cache element types: f16 | bf16 | q8_0 | q4_0 (plan/kv_types.py)
    cache_type_v: str = "f16"   # a quantized V cache needs flash attention
    # The KV pool all slots share (llama.cpp's unified KV cache), as a memory budget:
    # "256MiB", "1GiB", "8192cells"; a bare number is MiB. "" = the memory plan's default
    # (plan/kv_pool.py). Sequences take cells as they grow; the scheduler admits and preempts.
    kv_budget: str = ""
    # RAM cache of KV states of conversations that lost their slot (0 = off, -1 = a share of
    # the RAM free at load: plan/cache_sizes.py).
    prompt_cache_mib: int = -1
    # The disk tier under it: "2GiB", "0" = off, "" = a few GiB, at most a tenth of the free disk.
    disk_cache: str = ""
    # N-gram speculation (prompt lookup): up to this many drafted tokens verified per step
    # for each request that does not choose itself (0 = off). Output is unchanged either way;
    # on by default because the drafter drafts only while its drafts are accepted and a step
    # has room (engine/ngram.py, engine/step_cost.py), so plain text pays nothing for it.
    # 15: a lone sequence's step is then 16 tokens. ggml's kernels work in tiles of 16, and on an
    # AMD Zen 4 a 17-token step of qwen-coder cost 7.0-7.4 one-token steps against 6.0-6.8 for 16;
    # the code edit there went 40.2 -> 52.0 tok/s (medians of 3, alternating). Not measured on Intel.
    draft_max: int = 15
    # Reasoning tokens a chat reply may write inside its <think> block before the engine closes
    # it and the model answers (-1 = no limit; a request may set its own).
    reasoning_budget: int = -1
    queue_size: int = 64        # requests waiting beyond the slots; more are refused
    # Every request ends: one that is still queued or generating this many seconds after it
    # was submitted is finished with an error and its slot freed (0 = no deadline).
    request_timeout: int = 600
    # A llama.cpp call that never returns cannot be interrupted: when one engine step has run
    # this long, every live request is ended (503) and /health says "stalled" (0 = off).
    # Generous: one 512-token prefill chunk of a large model on a slow CPU takes minutes.
    stall_timeout: float = 300
    # A Jinja chat template file used instead of the one in the GGUF (llama-server's
    # --chat-template-file): for a model whose template lacks tool or thinking support.
    chat_template: str = ""
    # Other machines' devices for this model (llama.cpp RPC workers, `edge-infer worker`):
    # "host:port" each. The plan places layers on them by the memory each reports, and the
    # engine runs in a child process (engine/child.py): a worker lost aborts llama.cpp's client.
    rpc: tuple[str, ...] = ()

    def check_sizes(self) -> None:
        """Refuse, before anything loads, the sizes llama.cpp would abort or fail on: each
        step decodes one token per slot, so a batch must hold one per slot; llama.cpp allows
        256 sequences (LLAMA_MAX_SEQ) and fails creating a context beyond."""
        if not 1 <= self.parallel <= MAX_SLOTS:
            raise EdgeInferError(f"--parallel must be 1 to {MAX_SLOTS} (slots), not {self.parallel}")
        if self.ctx < 1 or self.n_batch < 1:
            raise EdgeInferError(f"--ctx and --n-batch must be 1 or more, not {self.ctx} and {self.n_batch}")
        if self.n_batch < self.parallel:
            raise EdgeInferError(f"--n-batch {self.n_batch} is smaller than --parallel {self.parallel}: each "
                                 f"step decodes a token for every slot; raise --n-batch or lower --parallel")

    @classmethod
    def from_env(cls, **overrides) -> "EngineSettings":
        values = {}
        for f in fields(cls):
            raw = os.environ.get(f"EDGE_INFER_{f.name.upper()}")
            if raw is None:
                continue
            if f.name == "n_gpu_layers" and raw.strip().lower() in ("", "auto"):
                values[f.name] = None
            elif f.type in ("bool", bool):
                values[f.name] = raw.strip().lower() in ("1", "true", "yes", "on")
            elif f.name in ("chat_template", "gpu_memory"):  # a path or a size: kept as given
                values[f.name] = raw.strip()
            elif f.name == "rpc":  # host:port,host:port
                values[f.name] = tuple(e.strip() for e in raw.split(",") if e.strip())
            elif f.type in ("str", str):
                values[f.name] = raw.strip().lower()
            elif f.type in ("float", float):
                values[f.name] = float(raw)
            else:
                values[f.name] = int(raw)
        values.update({k: v for k, v in overrides.items() if v is not None})
        return replace(cls(), **values)
