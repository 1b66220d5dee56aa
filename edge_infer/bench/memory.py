"""`edge-infer bench-memory`: how many conversations a KV budget keeps, and what a follow-up
turn costs, edge-infer vs llama.cpp's own llama-server, side by side in one run.

Conversations have ~1,000-token histories, each its own text (no shared prefix to help).
"Kept" = a follow-up turn whose prompt reused at least 90% of its history from cache
(edge-infer: usage.prompt_tokens_details.cached_tokens; llama-server: timings.cache_n).
Turns are one-token completions, so a turn's latency is its time to first token.
"""

from __future__ import annotations

import random
import statistics
import sys
import time
from dataclasses import dataclass

import httpx

from edge_infer.bench import llama_server as llama_server_bench
from edge_infer.bench.http import ServerProcess, free_port

FOLLOW_UP = "Now say it again in five words."


def history(tag: str, n_lines: int = 30) -> str:
    # ~29 tokens a line: ~900 tokens with the template, so that a follow-up still fits in
    # llama-server's 1,024-cell slots at -c 4096 -np 4; different from the first line on.
    return "\n".join(f"[{tag}] note {i}: the {tag} ledger shows {i * 7 % 13} crates of item {i}."
                     for i in range(n_lines))


@dataclass
class Turn:
    latency_s: float
    prompt_tokens: int
    cached_tokens: int
    refused: bool = False  # answered 4xx/5xx (e.g. the prompt does not fit the slot)


class Chat:
    def __init__(self, base_url: str):
        self.http = httpx.Client(base_url=base_url, timeout=600)
        self.model = self.http.get("/models").json()["data"][0]["id"]  # edge-infer refuses other names

    def turn(self, messages: list[dict]) -> Turn:
        t0 = time.perf_counter()
        r = self.http.post("/chat/completions", json={"messages": messages, "max_tokens": 1,
                                                      "temperature": 0, "model": self.model})
        if r.status_code >= 400:
            return Turn(time.perf_counter() - t0, 0, 0, refused=True)
        body = r.json()
        usage = body.get("usage") or {}
        timings = body.get("timings") or {}
        cached = timings.get("cache_n")
        if cached is None:
            cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens", 0)
        return Turn(time.perf_counter() - t0, usage.get("prompt_tokens", 0), int(cached or 0))


def conversation(tag: str) -> list[dict]:
    return [{"role": "system", "content": f"You keep the {tag} ledger."},
            {"role": "user", "content": history(tag)}]


def follow_up(conv: list[dict]) -> list[dict]:
    return conv + [{"role": "assistant", "content": "Noted."}, {"role": "user", "content": FOLLOW_UP}]


def kept_conversations(chat: Chat, n: int, tag: str) -> dict:
    """n conversations, then one follow-up each in the same order (round robin: the worst
    case for LRU): how many follow-ups reused >= 90% of their history, how many were refused."""
    convs = [conversation(f"{tag}{i}") for i in range(n)]
    firsts = [chat.turn(c) for c in convs]
    follows = [chat.turn(follow_up(c)) for c in convs]
    kept = sum(not f.refused and not first.refused and f.cached_tokens >= 0.9 * first.prompt_tokens
               for first, f in zip(firsts, follows))
    return {"kept": kept, "refused": sum(t.refused for t in firsts + follows),
            "history_tokens": statistics.median(t.prompt_tokens for t in firsts),
            "follow_p50_s": statistics.median(f.latency_s for f in follows)}


def follow_up_ttft(chat: Chat, n: int = 16, seed: int = 0) -> dict:
    """n conversations over the server's slots, then follow-ups in random order, against a
    fresh ~50-token prompt's TTFT."""
    convs = [conversation(f"ttft{i}") for i in range(n)]
    for c in convs:
        chat.turn(c)
    order = list(range(n))
    random.Random(seed).shuffle(order)
    follows = [chat.turn(follow_up(convs[i])) for i in order]
    fresh = [chat.turn([{"role": "user", "content": f"Question {i}: " + "name a colour of the sky at dusk, "
                         "a fruit that is yellow, and a bird that cannot fly, in a list please." * 1}])
             for i in range(8)]
    return {"follow_p50": statistics.median(t.latency_s for t in follows),
            "fresh_p50": statistics.median(t.latency_s for t in fresh),
            "fresh_tokens": statistics.median(t.prompt_tokens for t in fresh),
            "reused": sum(t.cached_tokens >= 0.9 * (t.prompt_tokens - 20) for t in follows)}


def llama_server(binary: str, model_path, threads: int, ctx: int, parallel: int, cache_ram_mib: int,
                 extra: list[str] = ()) -> ServerProcess:
    return llama_server_bench.process(binary, model_path, threads, ctx, parallel, cache_ram_mib, extra)


def edge_infer(model_path, threads: int, ctx: int, parallel: int, *flags: str) -> ServerProcess:
    port = free_port()
    argv = [sys.executable, "-m", "edge_infer", "serve", str(model_path), "--port", str(port),
            "--threads", str(threads), "--ctx", str(ctx), "--parallel", str(parallel), *flags]
    return ServerProcess("edge-infer " + " ".join([f"--parallel {parallel}", *flags]), argv, port)


def edge_infer_defaults(model_path, *flags: str, kv_dir=None) -> ServerProcess:
    """`serve MODEL` as a user starts it: only the port given (and `flags`), in its own
    disk-cache folder (`kv_dir`, or a new one) so runs do not help each other."""
    import os
    import tempfile

    port = free_port()
    argv = [sys.executable, "-m", "edge_infer", "serve", str(model_path), "--port", str(port), "--only", *flags]
    own = None if kv_dir else tempfile.mkdtemp(prefix="ei-kv-")
    env = {**os.environ, "EDGE_INFER_KV_CACHE": str(kv_dir or own)}
    server = ServerProcess("edge-infer " + (" ".join(flags) or "(defaults)"), argv, port, env=env)
    if own:
        server.remove_after.append(own)  # a code edit's states filled 315 MiB a run
    return server


def build_llama_server() -> str:
    return llama_server_bench.build()


def f16_mib(model_path, cells: int) -> float:
    """MiB of `cells` f16 KV cells of this model (what llama-server -c cells allocates)."""
    from edge_infer.gguf.info import read_model_info
    from edge_infer.plan.estimate import estimate_memory

    per_cell = estimate_memory(read_model_info(model_path), 256, 1).kv_bytes_per_token
    return cells * per_cell / (1024 * 1024)


def long_conversations(base_url: str, rss, n: int = 4, n_lines: int = 115) -> dict:
    """n clients at once, each a ~3,300-token conversation (most of a 4,096 context): how many
    were refused and the server's peak RSS meanwhile (sampled every 0.1 s)."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    peak, done = [rss()], threading.Event()

    def sample():
        while not done.wait(0.1):
            peak.append(rss())

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    chats = [Chat(base_url) for _ in range(n)]
    with ThreadPoolExecutor(n) as pool:
        turns = list(pool.map(lambda i: chats[i].turn([{"role": "user", "content": history(f"long{i}", n_lines)}]),
                              range(n)))
    done.set()
    sampler.join()
    return {"refused": sum(t.refused for t in turns), "prompt_tokens": statistics.median(t.prompt_tokens for t in turns),
            "peak_rss": max(peak), "wall_s": max(t.latency_s for t in turns)}
