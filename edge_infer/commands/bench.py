"""`edge-infer bench MODEL`: one workload through the engine at each concurrency and through
the serial llama_cpp.Llama baseline, side by side in one run."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from edge_infer.commands.common import add_engine_args, add_model_arg, engine_settings, resolve_model


def register(sub) -> None:
    p = sub.add_parser("bench", help="throughput and latency: engine vs serial llama_cpp.Llama")
    add_model_arg(p)
    p.add_argument("--concurrency", default="1,2,4,8", help="comma-separated client counts")
    p.add_argument("--requests", type=int, default=16, help="requests per pass")
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--repeat", type=int, default=1,
                   help="passes per system and concurrency; the median pass is reported (noisy machines)")
    p.add_argument("--no-baseline", action="store_true", help="skip the llama_cpp.Llama baseline")
    p.add_argument("--baseline-flash-attn", choices=["both", "off", "same"], default="both",
                   help="'off' runs Llama as llama-cpp-python ships it; 'same' gives it the engine's "
                        "flash-attention setting (isolates batching); 'both' runs both, one table each")
    p.add_argument("--compare-lib", metavar="DIR", type=Path,
                   help="instead of the baselines: the engine on this process's llama.cpp vs the same "
                        "version's libraries in DIR (e.g. a -march=native build: make bench-native)")
    p.add_argument("--compare-env", metavar="K=V", action="append", default=[],
                   help="instead of the baselines: the engine as is vs with these environment settings "
                        "(e.g. EDGE_INFER_CPU_VARIANT=icelake); combines with --compare-lib")
    p.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    add_engine_args(p)
    p.set_defaults(func=main)


def main(args) -> int:
    import psutil

    from edge_infer.bench.local import SerialLlama, engine_client
    from edge_infer.bench.report import comparison_table, summary
    from edge_infer.bench.workload import median_pass, parse_levels, run_pass
    from edge_infer.engine import Engine

    levels = parse_levels(args.concurrency)
    path, name = resolve_model(args.model)
    settings = engine_settings(args, parallel=args.parallel or max(levels), ctx=args.ctx or 1024)
    if args.compare_lib or args.compare_env:
        return _compare_builds(args, path, levels, settings)
    proc = psutil.Process()

    def load_engine():
        engine = Engine(path, settings, name=name)
        return engine_client(engine, args.max_tokens), engine_client(engine, 4), engine.close

    def baseline(flash_attn: bool):
        def load():
            base = SerialLlama(path, n_ctx=settings.ctx, n_threads=settings.n_threads,
                               n_batch=settings.n_batch, flash_attn=flash_attn)
            return base.client(args.max_tokens), base.client(4), base.close
        return load

    baselines = []
    if not args.no_baseline:
        if args.baseline_flash_attn in ("both", "off") or settings.flash_attn == "off":
            baselines.append(("llama_cpp", "llama_cpp.Llama as shipped (flash attention off)", baseline(False)))
        if args.baseline_flash_attn in ("both", "same") and settings.flash_attn != "off":
            baselines.append(("llama_cpp+fa", "llama_cpp.Llama with the engine's flash attention", baseline(True)))
    systems = [("engine", load_engine)] + [(label, load) for label, _, load in baselines]
    prompts = _prompts(path, args.requests)
    print(f"{name}: {args.requests} requests x {args.max_tokens} tokens, greedy, {settings.n_threads} "
          f"threads, {settings.parallel} slots, flash attention {settings.flash_attn}", file=sys.stderr)
    # Alternate the systems at each concurrency so drift in machine speed hits both alike.
    # Only one is loaded at a time: two llama.cpp thread teams in one process fight for
    # the cores (measured: the engine alone fell from 112 to 35 tok/s with both loaded).
    runs: dict[tuple[str, int], list] = {}
    for c, _rep in [(c, r) for r in range(max(1, args.repeat)) for c in levels]:
        for label, load in systems:
            rss0 = proc.memory_info().rss
            client, warm_up, close = load()
            try:
                _call(warm_up, prompts[0])
                mem = proc.memory_info().rss - rss0
                result = run_pass(label, client, prompts, c, lambda: mem)
            finally:
                close()
            runs.setdefault((label, c), []).append(result)
            print(f"  {label:<9} c={c}: {result.agg_tok_s:.1f} tok/s", file=sys.stderr)
    passes = {label: [median_pass(runs[(label, c)]) for c in levels] for label, _ in systems}
    engine_passes = passes["engine"]
    if not baselines:
        print(comparison_table(engine_passes, []))
    for label, title, _ in baselines:
        print(f"\nengine vs {title}:")
        print(comparison_table(engine_passes, passes[label]))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"model": name, "settings": settings.__dict__, "max_tokens": args.max_tokens,
                       "engine": [p.to_dict() for p in engine_passes],
                       "baselines": {label: {"title": title, "passes": [p.to_dict() for p in passes[label]],
                                             "ratios": summary(engine_passes, passes[label])}
                                     for label, title, _ in baselines}}, f, indent=2)
    return 0


def _compare_builds(args, path, levels, settings) -> int:
    from edge_infer.bench.builds import compare_builds
    from edge_infer.bench.report import comparison_table, summary
    from edge_infer.errors import EdgeInferError

    lib = args.compare_lib.expanduser().resolve() if args.compare_lib else None
    if lib is not None and not any(lib.glob("*llama*")):
        raise EdgeInferError(f"no llama.cpp libraries in {lib}")
    overrides = {}
    for item in args.compare_env:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise EdgeInferError(f"--compare-env takes KEY=VALUE, not {item!r}")
        overrides[key] = value
    what = " ".join([str(lib)] * bool(lib) + args.compare_env)
    extra = ["--requests", str(args.requests), "--max-tokens", str(args.max_tokens),
             "--parallel", str(settings.parallel), "--ctx", str(settings.ctx), "--threads", str(settings.n_threads)]
    print(f"this build vs {what}: {args.requests} requests x {args.max_tokens} tokens, "
          f"{settings.n_threads} threads, {settings.parallel} slots", file=sys.stderr)
    passes = compare_builds(str(path), [("installed", None, {}), ("compared", lib, overrides)], levels,
                            args.repeat, extra)
    print(f"\nthis build as installed vs {what} (compared):")
    print(comparison_table(passes["installed"], passes["compared"]))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"installed": [p.to_dict() for p in passes["installed"]],
                       "compared": [p.to_dict() for p in passes["compared"]], "lib": str(lib or ""),
                       "env": overrides,
                       "ratios": summary(passes["installed"], passes["compared"])}, f, indent=2)
    return 0


def _prompts(path, n: int) -> list[str]:
    """The same text for every system: chat-formatted questions, sent as raw prompts."""
    from edge_infer.bench.workload import QUESTIONS, cycle
    from edge_infer.chat.template import ChatTemplate
    from edge_infer.gguf.info import read_model_info

    info = read_model_info(path)
    template = ChatTemplate(info.chat_template, architecture=info.architecture)
    prompts = [template.render([{"role": "user", "content": q}]) for q in QUESTIONS]
    return cycle(prompts, n)


def _call(client, prompt: str):
    import asyncio
    import inspect

    return asyncio.run(client(prompt)) if inspect.iscoroutinefunction(client) else client(prompt)
