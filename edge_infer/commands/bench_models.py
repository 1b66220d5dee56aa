"""`edge-infer bench-models A B`: many models behind one server, one run: switch cost
(TTFT for a model that must load vs a loaded one), both models served at once vs each
alone on the same cores (threads shared, then split), and the RSS peak of switches under
a budget that holds one model."""

from __future__ import annotations

from edge_infer.commands.bench_memory import text_table


def register(sub) -> None:
    p = sub.add_parser("bench-models", help="many models: switch cost, two at once vs alone, RSS of a switch")
    p.add_argument("models", nargs="*", default=["smollm2", "gemma3"], help="two installed models (default smollm2 gemma3)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--requests", type=int, default=6, help="requests per client and model in the concurrency table")
    p.add_argument("--max-tokens", type=int, default=64)
    p.set_defaults(func=main)


def main(args) -> int:
    from edge_infer.bench import models as b
    from edge_infer.config import EngineSettings
    from edge_infer.host.residency import plan_footprint
    from edge_infer.host.sources import find_installed
    from edge_infer.units import MiB

    if len(args.models) != 2:
        raise SystemExit("bench-models needs two installed models (e.g. smollm2 gemma3)")
    first, second = args.models
    ctx, parallel = 1024, 4
    with b.serve(first, args.threads, ctx, parallel) as srv:
        switch = b.switch_cost(srv.target, args.models)
        shared = b.concurrent(srv.target, args.models, args.requests, args.max_tokens)
    rows = [["model", "TTFT loaded", "TTFT must load", "x", "runs must load (s)"]]
    for r in switch:
        rows.append([r["model"], f"{r['warm_ttft_s'] * 1000:.0f} ms", f"{r['cold_ttft_s'] * 1000:.0f} ms",
                     f"{r['cold_ttft_s'] / r['warm_ttft_s']:.1f}", " / ".join(f"{x:.2f}" for x in r["cold_runs"])])
    print("Switch cost (median of 3; a model that must load includes its load):\n" + text_table(rows) + "\n", flush=True)

    # Split cores: each model one thread, through the models config.
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "models.toml"
        config.write_text("".join(f'[models."{m}"]\nthreads = {max(1, args.threads // 2)}\n' for m in args.models))
        with b.serve(first, args.threads, ctx, parallel, "--models-config", str(config)) as srv:
            split = b.concurrent(srv.target, args.models, args.requests, args.max_tokens)
    rows = [["threads per model", "model", "alone tok/s", "both at once tok/s", "x alone", "errors"]]
    for label, table in ((f"{args.threads} (shared cores)", shared), (f"{max(1, args.threads // 2)} (split cores)", split)):
        for r in table:
            rows.append([label, r["model"], f"{r['alone_tok_s']:.1f}", f"{r['together_tok_s']:.1f}",
                         f"{r['ratio']:.2f}", str(r["errors"])])
    print(f"Two models at once vs alone (1 client each, {args.requests} x {args.max_tokens} tokens):\n"
          + text_table(rows) + "\n", flush=True)

    settings = EngineSettings(ctx=ctx, parallel=parallel, n_threads=args.threads)
    plans = {m: plan_footprint(find_installed(m).path, settings) for m in args.models}
    budget = max(p.ram for p in plans.values()) + 16 * MiB  # one model at a time
    from edge_infer.gguf.info import read_model_info
    from edge_infer.plan.estimate import estimate_memory
    from edge_infer.plan.fit import engine_estimate_kwargs

    compute = max(estimate_memory(read_model_info(find_installed(m).path), ctx, parallel,
                                  **engine_estimate_kwargs(settings)).compute_resident_bytes for m in args.models)
    with b.serve(first, args.threads, ctx, parallel, "--models-budget", f"{budget / MiB:.0f}MiB") as srv:
        peak = b.switch_peak(srv, [second, first])
    rows = [["budget", "largest compute buffer", "peak RSS over 4 switches", "budget + compute", "within",
             "loaded after"],
            [f"{budget / MiB:.0f} MiB", f"{compute / MiB:.0f} MiB", f"{peak['peak_rss'] / MiB:.0f} MiB",
             f"{(budget + compute) / MiB:.0f} MiB", "yes" if peak["peak_rss"] <= budget + compute else "NO",
             ", ".join(peak["loaded_after"])]]
    print("RSS of switches under a budget for one model (" + ", ".join(f"{m} plans {p.ram / MiB:.0f} MiB"
          for m, p in plans.items()) + "):\n" + text_table(rows), flush=True)
    return 0
