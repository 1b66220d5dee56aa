"""`edge-infer ladder MODEL`: every installed quant level of a model side by side: size,
load time, RSS, speed, perplexity and KL divergence from the highest precision."""

from __future__ import annotations

import json
import sys


def register(sub) -> None:
    p = sub.add_parser("ladder", help="compare the installed quant levels of a model",
                       description="Load each installed quant level of MODEL in turn and measure file "
                                   "size, load time, RSS, prefill and decode tok/s, perplexity on a fixed "
                                   "English text shipped with Python (pydoc_data.topics), and the KL "
                                   "divergence of its next-token distributions from the highest-precision "
                                   "level. The result is also saved under the data dir.")
    p.add_argument("model", help="installed model (any of its levels) or alias")
    p.add_argument("--tokens", type=int, default=512, help="tokens of text evaluated (default 512)")
    p.add_argument("--levels", help="only these levels (comma-separated), e.g. F16,Q8_0,Q4_K_M")
    p.add_argument("--threads", type=int, help="CPU threads (default: physical cores)")
    p.add_argument("--json", action="store_true", help="print JSON instead of the table")
    p.add_argument("--save", metavar="FILE", help="also write the JSON here")
    p.set_defaults(func=main)


def main(args) -> int:
    from edge_infer.bench.ladder import format_table, run_ladder, save
    from edge_infer.errors import ModelNotFoundError
    from edge_infer.gguf.quant_types import canonical
    from edge_infer.store.store import ModelStore

    store = ModelStore()
    found = store.find(args.model)
    if found is None:
        store.resolve(args.model)  # raises the usual "unknown model" / "not installed" message
        raise ModelNotFoundError(f"{args.model!r} is a file, not an installed model; `edge-infer import` it first")
    levels = store.family(found)
    if args.levels:
        wanted = {canonical(q) for q in args.levels.split(",") if q.strip()}
        levels = [m for m in levels if canonical(m.quant) in wanted]
    if not levels:
        raise ModelNotFoundError(f"no installed levels of {found.family} match {args.levels}")
    if len(levels) == 1:
        print(f"note: {found.family} has one installed level; `edge-infer quantize {found.label} "
              f"--from-f16 --to Q8_0,Q4_K_M` makes more", file=sys.stderr)
    ladder = run_ladder(levels, n_tokens=args.tokens, threads=args.threads,
                        say=lambda m: print(m, file=sys.stderr, flush=True))
    path = save(ladder)
    if args.save:
        save(ladder, args.save)
    if args.json:
        print(json.dumps(ladder.to_dict(), indent=2))
    else:
        print(format_table(ladder))
        print(f"\nsaved to {path}")
    return 0
