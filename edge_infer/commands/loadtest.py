"""`edge-infer loadtest`: concurrent streaming clients against an OpenAI-compatible server.

  edge-infer loadtest http://127.0.0.1:8080/v1          # any server, ours or not
  edge-infer loadtest --socket ~/.edge-infer.sock       # ours on a Unix socket
  edge-infer loadtest --compare llama-server            # ours vs llama.cpp's C++ llama-server
  edge-infer loadtest --compare smollm2 --baseline llama_cpp   # vs python -m llama_cpp.server
"""

from __future__ import annotations

import json
import sys

_DEFAULT = "\0default"
BASELINES = ("llama-server", "llama_cpp")


def register(sub) -> None:
    p = sub.add_parser("loadtest", help="HTTP load benchmark: N streaming clients against an OpenAI-compatible URL")
    p.add_argument("url", nargs="?", default="http://127.0.0.1:8080/v1", help="base URL (ending in /v1)")
    p.add_argument("--socket", metavar="PATH", help="connect through this Unix socket")
    p.add_argument("--model", help="model id to send (default: the first /v1/models lists)")
    p.add_argument("--api-key", help="sent as 'Authorization: Bearer KEY'")
    p.add_argument("--label", default="server", help="name of this system in the table")
    p.add_argument("--compare", nargs="?", const=_DEFAULT, metavar="MODEL",
                   help="start `edge-infer serve MODEL` (default: the default model) and a baseline in turn "
                        "and compare; `--compare llama-server` / `--compare llama_cpp` names the baseline instead")
    p.add_argument("--baseline", choices=BASELINES, default=None,
                   help="--compare: llama.cpp's C++ llama-server (default; built once, cached) or "
                        "python -m llama_cpp.server")
    p.add_argument("--concurrency", default="1,2,4,8", help="comma-separated client counts")
    p.add_argument("--requests", type=int, default=16, help="requests per pass (at least one per client)")
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--repeat", type=int, default=1,
                   help="passes per system and concurrency; the median (by tok/s) is reported (noisy machines)")
    p.add_argument("--threads", type=int, help="--compare: threads for both servers (default: physical cores)")
    p.add_argument("--ctx", type=int, default=1024, help="--compare: context per sequence for both servers")
    p.add_argument("--baseline-flash-attn", choices=["on", "off"], default="on",
                   help="--compare with llama_cpp: its flash attention ('on' matches ours: auto = on for CPU)")
    p.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    p.set_defaults(func=main)


def main(args) -> int:
    from edge_infer.bench.http import Target, run_http_pass, warm_up
    from edge_infer.bench.report import comparison_table, summary
    from edge_infer.bench.workload import median_pass, parse_levels

    levels = parse_levels(args.concurrency)
    if args.compare is not None:
        ours, theirs = _compare(args, levels)
    else:
        target = Target(args.url.rstrip("/"), model=args.model, api_key=args.api_key, uds=args.socket)
        warm_up(target)
        runs: dict[int, list] = {}
        for _ in range(max(1, args.repeat)):
            for c in levels:
                result = run_http_pass(args.label, target, c, args.requests, args.max_tokens)
                runs.setdefault(c, []).append(result)
                print(f"  {args.label} c={c}: {result.agg_tok_s:.1f} tok/s", file=sys.stderr)
        ours, theirs = [median_pass(runs[c]) for c in levels], []
    if theirs:
        print(comparison_table(ours, theirs))
        print("HTTP streaming clients; TTFT = request sent to first text chunk; mem = server process RSS")
    else:
        print(table(ours))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"max_tokens": args.max_tokens, "passes": [p.to_dict() for p in ours],
                       "baseline": [p.to_dict() for p in theirs], "ratios": summary(ours, theirs)}, f, indent=2)
    return 0


def _baseline_and_model(args) -> tuple[str, str | None]:
    """`--compare llama-server` names a baseline, `--compare smollm2` a model."""
    value = None if args.compare == _DEFAULT else args.compare
    if value in BASELINES:
        if args.baseline and args.baseline != value:
            raise SystemExit(f"--compare {value} and --baseline {args.baseline} disagree")
        return value, None
    return args.baseline or "llama-server", value


def _systems(args, levels, path, threads):
    """(ours, baseline) factories with matching settings: threads, slots, context per slot,
    the same KV cells in total, flash attention auto, the same prompt cache size."""
    from edge_infer.bench.http import ServerProcess
    from edge_infer.config import EngineSettings

    baseline, _ = _baseline_and_model(args)
    slots = max(levels)
    if baseline == "llama_cpp":   # one sequence at a time: its context is one slot's
        return (lambda: ServerProcess.ours(path, threads, args.ctx, slots),
                lambda: ServerProcess.llama_cpp(path, threads, args.ctx, flash_attn=args.baseline_flash_attn == "on"))
    from edge_infer.bench import llama_server

    binary = llama_server.build()
    from edge_infer.plan.cache_sizes import prompt_cache_bytes
    from edge_infer.units import MiB

    # The same RAM prompt cache (ours is auto-sized; llama-server's -1 would mean unlimited),
    # and no disk tier: llama-server has none, and ours would restore earlier runs' prompts.
    cells = args.ctx * slots
    cache_mib = prompt_cache_bytes(EngineSettings().prompt_cache_mib) // MiB
    return (lambda: ServerProcess.ours(path, threads, args.ctx, slots, "--kv-budget", f"{cells}cells",
                                       "--prompt-cache-mib", str(cache_mib), "--disk-cache", "0"),
            lambda: llama_server.process(binary, path, threads, cells, slots, cache_mib, label="llama-server"))


def _compare(args, levels):
    """Each server alone on the machine (two llama.cpp thread teams distort each other),
    alternating per concurrency so drift in machine speed hits both alike."""
    from edge_infer.bench.http import run_http_pass, warm_up
    from edge_infer.bench.workload import median_pass
    from edge_infer.commands.common import resolve_model
    from edge_infer.config import EngineSettings

    baseline, model = _baseline_and_model(args)
    path, name = resolve_model(model)
    threads = args.threads or EngineSettings().n_threads
    systems = _systems(args, levels, path, threads)
    print(f"{name}: {max(args.requests, 1)} requests x {args.max_tokens} tokens per pass, greedy, "
          f"{threads} threads, ctx {args.ctx} per slot, {max(levels)} slots; baseline {baseline}", file=sys.stderr)
    runs: dict[tuple[int, int], list] = {}
    for _ in range(max(1, args.repeat)):
        for c in levels:
            for i, make in enumerate(systems):
                with make() as server:
                    warm_up(server.target)
                    result = run_http_pass(server.label, server.target, c, args.requests, args.max_tokens,
                                           server.rss)
                runs.setdefault((i, c), []).append(result)
                print(f"  {server.label:<12} c={c}: {result.agg_tok_s:.1f} tok/s, TTFT p50 "
                      f"{result.ttft_p50_s * 1000:.0f} ms, {result.errors} errors", file=sys.stderr)
    return [median_pass(runs[(0, c)]) for c in levels], [median_pass(runs[(1, c)]) for c in levels]


def table(passes: list) -> str:
    lines = [f"{'system':<10} {'conc':>4} {'reqs':>4} {'err':>3} {'tokens':>6} {'agg tok/s':>9} "
             f"{'req tok/s':>9} {'TTFT p50':>9} {'TTFT p95':>9}"]
    for p in passes:
        lines.append(f"{p.system:<10} {p.concurrency:>4} {p.requests:>4} {p.errors:>3} {p.tokens:>6} "
                     f"{p.agg_tok_s:>9.1f} {p.per_req_tok_s:>9.1f} {p.ttft_p50_s * 1000:>7.0f}ms "
                     f"{p.ttft_p95_s * 1000:>7.0f}ms")
    lines.append("HTTP streaming clients; TTFT = request sent to first text chunk")
    return "\n".join(lines)
