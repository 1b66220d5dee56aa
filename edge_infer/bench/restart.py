"""`edge-infer bench-memory --tables restart`: the first turn after a server restart, with
the disk tier and without it, against a fresh ~50-token prompt, side by side in one run.

Each pass: start `serve` (defaults, a private disk-cache folder), send a conversation with a
~2,000-token history, stop the server (SIGTERM: a clean stop), start it again, send the
conversation's next turn (a one-token reply: its latency is its TTFT), then fresh prompts;
start it once more and send a fresh prompt first (the same cold start as the follow-up's).
Passes alternate (disk, no disk, disk, ...); the table shows every run and the medians.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from edge_infer.bench.http import ServerProcess
from edge_infer.bench.memory import Chat, edge_infer_defaults, follow_up, history

FRESH = "Name a colour of the sky at dusk, a fruit that is yellow, and a bird that cannot fly, in a list please."


@dataclass
class RestartRun:
    follow_s: float          # the first turn after the restart (TTFT)
    follow_cached: int       # its prompt tokens reused
    history_tokens: int
    fresh_s: float           # median of fresh ~50-token prompts on the same server, after it
    fresh_first_s: float     # a fresh ~50-token prompt as the first request after a start
    fresh_tokens: int
    state_bytes: int         # on disk for this conversation (0 without the tier)
    restore_mb_s: float      # read, check and restore (0 without the tier)


def serve(model_path, kv_dir: Path, *flags: str) -> ServerProcess:
    return edge_infer_defaults(model_path, *flags, kv_dir=kv_dir)


def conversation(n_lines: int) -> list[dict]:
    return [{"role": "system", "content": "You keep the restart ledger."},
            {"role": "user", "content": history("restart", n_lines)}]


def one_pass(model_path, flags: tuple[str, ...], n_lines: int) -> RestartRun:
    with tempfile.TemporaryDirectory(prefix="ei-kv-") as folder:
        kv_dir = Path(folder)
        conv = conversation(n_lines)
        with serve(model_path, kv_dir, *flags) as srv:
            first = Chat(srv.target.base_url).turn(conv)
        state_bytes = sum(p.stat().st_size for p in kv_dir.glob("*.kv"))
        with serve(model_path, kv_dir, *flags) as srv:
            chat = Chat(srv.target.base_url)
            follow = chat.turn(follow_up(conv))
            fresh = [chat.turn([{"role": "user", "content": f"Question {i}: {FRESH}"}]) for i in range(5)]
            stats = httpx.get(srv.target.base_url + "/stats", timeout=30).json()
        with serve(model_path, kv_dir, *flags) as srv:  # the same first request, but a fresh prompt
            fresh_first = Chat(srv.target.base_url).turn([{"role": "user", "content": f"Question 9: {FRESH}"}])
    seconds = stats.get("disk_cache_restore_seconds_total") or 0
    return RestartRun(follow.latency_s, follow.cached_tokens, first.prompt_tokens,
                      statistics.median(t.latency_s for t in fresh), fresh_first.latency_s, fresh[0].prompt_tokens,
                      state_bytes,
                      stats.get("disk_cache_restored_bytes_total", 0) / seconds / 1e6 if seconds else 0.0)


def run(model_path, repeats: int = 3, n_lines: int = 83) -> dict[str, list[RestartRun]]:
    """Alternating passes with the disk tier (defaults) and without it (--disk-cache 0)."""
    configs = {"disk tier (defaults)": (), "no disk tier (--disk-cache 0)": ("--disk-cache", "0")}
    runs: dict[str, list[RestartRun]] = {name: [] for name in configs}
    for _ in range(repeats):
        for name, flags in configs.items():
            runs[name].append(one_pass(model_path, flags, n_lines))
            print(f"done: {name} ({time.strftime('%H:%M:%S')})", flush=True)
    return runs


def bytes_per_token(model_path, n_lines: int = 83) -> dict[str, float]:
    """Bytes on disk per token of a saved conversation, f16 and q8_0 KV."""
    out = {}
    for kv in ("f16", "q8_0"):
        with tempfile.TemporaryDirectory(prefix="ei-kv-") as folder:
            with serve(model_path, Path(folder), "--cache-type-k", kv, "--cache-type-v", kv) as srv:
                turn = Chat(srv.target.base_url).turn(conversation(n_lines))
            files = list(Path(folder).glob("*.kv"))
            out[kv] = sum(p.stat().st_size for p in files) / max(1, turn.prompt_tokens + 1)
    return out
