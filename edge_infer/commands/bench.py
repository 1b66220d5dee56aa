"""`edge-infer bench MODEL`: one workload through the engine at each concurrency and through
the serial llama_cpp.Llama baseline, side by side in one run."""

from __future__ import annotations

import json
import sys

from edge_infer.commands.common import add_engine_args, add_model_arg, engine_settings, resolve_model


def register(sub) -> None:
    p = sub.add_parser("bench", help="throughput and latency: engine vs serial llama_cpp.Llama")
    add_model_arg(p)
    p.add_argument("--concurrency", default="1,2,4,8", help="comma-separated client counts")
    p.add_argument("--requests", type=int, default=16, help="requests per pass")
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--no-baseline", action="store_true", help="skip the llama_cpp.Llama baseline")
    p.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    add_engine_args(p)
    p.set_defaults(func=main)


def main(args) -> int:
    import psutil

    from edge_infer.bench.local import SerialLlama, engine_client
    from edge_infer.bench.report import comparison_table, summary
    from edge_infer.bench.workload import QUESTIONS, run_pass
    from edge_infer.engine import Engine

    levels = sorted({int(c) for c in args.concurrency.split(",") if c.strip()})
    if not levels or min(levels) < 1:
        print("edge-infer: error: --concurrency needs positive integers like 1,2,4,8", file=sys.stderr)
        return 2
    path, name = resolve_model(args.model)
    settings = engine_settings(args, parallel=args.parallel or max(levels), ctx=args.ctx or 1024)
    rss = psutil.Process().memory_info
    engine = Engine(path, settings, name=name)
    # The same text for both systems: chat-formatted questions, sent as raw prompts.
    prompts = [engine.template.render([{"role": "user", "content": q}]) for q in QUESTIONS]
    prompts = (prompts * (args.requests // len(prompts) + 1))[:args.requests]
    print(f"{name}: {args.requests} requests x {args.max_tokens} tokens, greedy, "
          f"{settings.n_threads} threads, {settings.parallel} slots", file=sys.stderr)
    engine_passes = []
    with engine:
        engine_client(engine, 4)(prompts[0])  # warm-up
        for c in levels:
            engine_passes.append(run_pass("engine", engine_client(engine, args.max_tokens), prompts, c,
                                          lambda: rss().rss))
            print(f"  engine   c={c}: {engine_passes[-1].agg_tok_s:.1f} tok/s", file=sys.stderr)
    base_passes = []
    if not args.no_baseline:
        base = SerialLlama(path, n_ctx=settings.ctx, n_threads=settings.n_threads, n_batch=settings.n_batch)
        try:
            base.client(4)(prompts[0])
            for c in levels:
                base_passes.append(run_pass("llama_cpp", base.client(args.max_tokens), prompts, c,
                                            lambda: rss().rss))
                print(f"  baseline c={c}: {base_passes[-1].agg_tok_s:.1f} tok/s", file=sys.stderr)
        finally:
            base.close()
    print(comparison_table(engine_passes, base_passes))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"model": name, "settings": settings.__dict__, "max_tokens": args.max_tokens,
                       "engine": [p.to_dict() for p in engine_passes],
                       "baseline": [p.to_dict() for p in base_passes],
                       "ratios": summary(engine_passes, base_passes)}, f, indent=2)
    return 0
