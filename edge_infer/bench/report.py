"""Bench tables: each engine row next to the baseline at the same concurrency, with ratios."""

from __future__ import annotations

from edge_infer.bench.workload import PassResult

HEADER = (f"{'system':<12} {'conc':>4} {'reqs':>4} {'err':>3} {'tokens':>6} {'agg tok/s':>9} "
          f"{'req tok/s':>9} {'TTFT p50':>9} {'TTFT p95':>9} {'mem MiB':>8} {'x agg':>6} {'x TTFT':>7}")


def _row(p: PassResult, base: PassResult | None) -> str:
    agg_ratio = f"{p.agg_tok_s / base.agg_tok_s:.2f}" if base and base.agg_tok_s else "-"
    ttft_ratio = f"{p.ttft_p50_s / base.ttft_p50_s:.3f}" if base and base.ttft_p50_s else "-"
    return (f"{p.system:<12} {p.concurrency:>4} {p.requests:>4} {p.errors:>3} {p.tokens:>6} "
            f"{p.agg_tok_s:>9.1f} {p.per_req_tok_s:>9.1f} {p.ttft_p50_s * 1000:>7.0f}ms "
            f"{p.ttft_p95_s * 1000:>7.0f}ms {p.mem_mib:>8.0f} {agg_ratio:>6} {ttft_ratio:>7}")


def comparison_table(engine: list[PassResult], baseline: list[PassResult]) -> str:
    by_conc = {b.concurrency: b for b in baseline}
    lines = [HEADER]
    for p in engine:
        base = by_conc.get(p.concurrency)
        lines.append(_row(p, base))
        if base:
            lines.append(_row(base, None))
    lines.append("x agg = engine aggregate tok/s / baseline; x TTFT = engine TTFT p50 / baseline "
                 "(lower is better); mem = RSS the system added when loaded")
    return "\n".join(lines)


def summary(engine: list[PassResult], baseline: list[PassResult]) -> dict:
    by_conc = {b.concurrency: b for b in baseline}
    out = {}
    for p in engine:
        b = by_conc.get(p.concurrency)
        if b and b.agg_tok_s and b.ttft_p50_s:
            out[p.concurrency] = {"agg_ratio": p.agg_tok_s / b.agg_tok_s,
                                  "per_req_ratio": p.per_req_tok_s / b.per_req_tok_s if b.per_req_tok_s else None,
                                  "ttft_p50_ratio": p.ttft_p50_s / b.ttft_p50_s}
    return out
