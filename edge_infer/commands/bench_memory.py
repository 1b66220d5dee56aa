"""`edge-infer bench-memory MODEL`: conversations kept at one KV budget and follow-up TTFT,
edge-infer vs llama.cpp's llama-server (built once by packaging/llama_server.py), serve's
defaults vs the memory layout of before the shared pool, and the first turn after a restart
with and without the disk tier, one run."""

from __future__ import annotations

import statistics

from edge_infer.commands.common import add_model_arg, resolve_model


def register(sub) -> None:
    p = sub.add_parser("bench-memory", help="KV memory: conversations kept and follow-up TTFT vs llama-server")
    add_model_arg(p)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--conversations", default="4,5,8,9",
                   help="conversation counts for the 'kept' table (default 4,5,8,9)")
    p.add_argument("--tables", default="kept,ttft,serve,restart",
                   help="which tables, comma-separated: kept, ttft, serve, restart (default all four)")
    p.add_argument("--repeats", type=int, default=3, help="alternating runs per system (ttft, restart; default 3)")
    p.set_defaults(func=main)


def text_table(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in rows)


def main(args) -> int:
    from edge_infer.bench import memory as m

    tables = {t.strip() for t in args.tables.split(",") if t.strip()}
    unknown = tables - {"kept", "ttft", "serve", "restart"}
    if unknown:
        raise SystemExit(f"--tables: unknown table(s) {', '.join(sorted(unknown))}; "
                         "choose from kept, ttft, serve, restart")
    path, _ = resolve_model(args.model)
    if "kept" in tables or "ttft" in tables:
        binary = m.build_llama_server()
    if "kept" in tables:
        _kept_table(m, binary, path, args)
    if "ttft" in tables:
        _ttft_table(m, binary, path, args.threads, args.repeats)
    if "serve" in tables:
        _serve_table(m, path, args.threads)
    if "restart" in tables:
        _restart_table(path, args.repeats)
    return 0


def _kept_table(m, binary, path, args) -> None:
    counts = [int(x) for x in args.conversations.split(",") if x.strip()]
    t = args.threads
    # llama-server -c 4096 -np 4 holds 4,096 f16 cells: the KV memory every row gets.
    same_kv = [
        m.llama_server(binary, path, t, 4096, 4, 0),
        m.edge_infer(path, t, 4096, 4, "--kv-budget", "4096cells", "--prompt-cache-mib", "0"),
        # The same bytes in q8_0 hold 1.88x the cells: 8 slots to keep them in.
        m.edge_infer(path, t, 4096, 8, "--kv-budget", f"{m.f16_mib(path, 4096):.3f}MiB",
                     "--cache-type-k", "q8_0", "--cache-type-v", "q8_0", "--prompt-cache-mib", "0"),
    ]
    rows = [["server (same KV memory: 4,096 f16 cells)"] + [f"kept of {n}" for n in counts] + ["refused"]]
    for srv in same_kv:
        with srv:
            chat = m.Chat(srv.target.base_url)
            got = [m.kept_conversations(chat, n, f"k{n}-") for n in counts]
            rows.append([srv.label] + [str(g["kept"]) for g in got] + [str(sum(g["refused"] for g in got))])
            print(f"done: {srv.label}", flush=True)
    print("\nConversations kept without re-evaluation (~900-token histories, follow-ups round robin)")
    print(text_table(rows))


def _ttft_table(m, binary, path, t: int, repeats: int) -> None:
    """llama-server's defaults (its 8 GiB --cache-ram) vs edge-infer's defaults (no flags but
    the port) vs edge-infer's defaults of before (a fixed 128 MiB RAM tier, no disk tier);
    runs alternate."""
    systems = [lambda: m.llama_server(binary, path, t, 8192, 4, 8192),
               lambda: m.edge_infer_defaults(path),
               lambda: m.edge_infer_defaults(path, "--prompt-cache-mib", "128", "--disk-cache", "0")]
    results: dict[str, list[dict]] = {}
    for _ in range(repeats):
        for make in systems:
            with make() as srv:
                results.setdefault(srv.label, []).append(m.follow_up_ttft(m.Chat(srv.target.base_url)))
                print(f"done: {srv.label}", flush=True)
    rows = [["server (16 conversations)", "follow-up p50 ms", "fresh ~50-token p50 ms",
             "follow/fresh", "follow-ups reused", "follow/fresh, every run"]]
    for label, runs in results.items():
        ratios = [r["follow_p50"] / r["fresh_p50"] for r in runs]
        med = lambda key: statistics.median(r[key] for r in runs)  # noqa: E731
        rows.append([label, f"{med('follow_p50') * 1000:.0f}", f"{med('fresh_p50') * 1000:.0f}",
                     f"{statistics.median(ratios):.2f}", f"{min(r['reused'] for r in runs)}/16",
                     " / ".join(f"{x:.2f}" for x in ratios)])
    print(f"\nFollow-up turns in random order (one-token replies: latency = TTFT), medians of {repeats} runs")
    print(text_table(rows))


def _restart_table(path, repeats: int) -> None:
    from edge_infer.bench import restart

    runs = restart.run(path, repeats)
    rows = [["serve (restarted between turns)", "history tokens", "follow-up TTFT ms", "reused",
             "fresh first ms", "fresh after ms", "follow/fresh first", "follow/fresh after", "restore MB/s",
             "follow-up ms, every run"]]
    for label, rs in runs.items():
        med = lambda key: statistics.median(getattr(r, key) for r in rs)  # noqa: E731
        follow, first, after, mb_s = med("follow_s"), med("fresh_first_s"), med("fresh_s"), med("restore_mb_s")
        rows.append([label, str(rs[0].history_tokens), f"{follow * 1000:.0f}", f"{med('follow_cached'):.0f}",
                     f"{first * 1000:.0f}", f"{after * 1000:.0f}", f"{follow / first:.2f}", f"{follow / after:.2f}",
                     f"{mb_s:.0f}" if mb_s else "-", " / ".join(f"{r.follow_s * 1000:.0f}" for r in rs)])
    print(f"\nThe first turn after a restart, medians of {repeats} alternating runs (fresh = a ~50-token prompt: "
          "'first' as the first request after a start, 'after' on a server that already answered)")
    print(text_table(rows))
    per_token = restart.bytes_per_token(path)
    print("\nBytes on disk per token of a saved conversation: "
          + ", ".join(f"{kv} KV {b / 1024:.1f} KiB" for kv, b in per_token.items()))


def _runs(values: list[float]) -> str:
    return f"{sum(values) / len(values):.1f} ({' / '.join(f'{v:.0f}' for v in values)})"


def _serve_table(m, path, t: int) -> None:
    """`serve` with its defaults vs the layout of before the pool (every one of 4 slots
    reserved a 4,096-cell f16 context, no prompt cache): memory, throughput, long prompts."""
    from edge_infer.bench.http import run_http_pass, warm_up

    configs = {"before": ("--kv-budget", "16384cells", "--prompt-cache-mib", "0"), "defaults": ()}
    # Throughput on a 2-core box drifts by 10-20% from run to run: each layout runs twice,
    # in the order A B B A, and the table shows the mean tok/s (memory from the first run).
    results: dict[str, dict] = {}
    for name in ("before", "defaults", "defaults", "before"):
        with m.edge_infer(path, t, 4096, 4, *configs[name]) as srv:
            warm_up(srv.target)
            r = results.setdefault(name, {"label": srv.label, "one": [], "eight": []})
            r.setdefault("loaded", srv.rss())
            r["one"].append(run_http_pass(srv.label, srv.target, 1, 8, 64).agg_tok_s)
            r["eight"].append(run_http_pass(srv.label, srv.target, 8, 16, 64).agg_tok_s)
            if "long" not in r:
                r["long"] = m.long_conversations(srv.target.base_url, srv.rss)
            print(f"done: {srv.label}", flush=True)
    rows = [["serve --ctx 4096 --parallel 4", "RSS loaded MiB", "tok/s c=1 (2 runs)", "tok/s c=8 (2 runs)",
             "4 x ~3,300-token prompts: refused", "peak RSS MiB"]]
    for name, note in (("before", "  (as before the pool)"), ("defaults", "  (defaults)")):
        r = results[name]
        rows.append([r["label"] + note, f"{r['loaded'] / 2**20:.1f}", _runs(r["one"]), _runs(r["eight"]),
                     f"{r['long']['refused']} of 4", f"{r['long']['peak_rss'] / 2**20:.1f}"])
    print("\nserve's defaults vs the memory of before the shared pool (ctx x slots f16, no prompt cache)")
    print(text_table(rows))
