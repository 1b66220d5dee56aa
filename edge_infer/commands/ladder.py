"""`edge-infer ladder MODEL`: every installed quant level of a model side by side: size,
load time, RSS, speed, perplexity and KL divergence from the highest precision.
`--kv-types f16,q8_0,q4_0`: one model file instead, once per KV cache type (K and V)."""

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
    p.add_argument("--kv-types", metavar="LIST",
                   help="compare KV cache types (comma-separated, first = reference), e.g. f16,q8_0,q4_0, "
                        "on the one model named instead of its quant levels; not saved for the app")
    p.add_argument("--threads", type=int, help="CPU threads (default: physical cores)")
    p.add_argument("--json", action="store_true", help="print JSON instead of the table")
    p.add_argument("--save", metavar="FILE", help="also write the JSON here")
    p.set_defaults(func=main)


def main(args) -> int:
    from edge_infer.bench.ladder import format_table, parse_kv_types, run_kv_ladder, run_ladder, save
    from edge_infer.errors import ModelNotFoundError
    from edge_infer.gguf.quant_types import canonical
    from edge_infer.store.store import ModelStore

    kv_types = parse_kv_types(args.kv_types) if args.kv_types is not None else None  # before any lookup
    store = ModelStore()
    found = store.find(args.model)
    if found is None:
        store.resolve(args.model)  # raises the usual "unknown model" / "not installed" message
        raise ModelNotFoundError(f"{args.model!r} is a file, not an installed model; `edge-infer import` it first")
    def say(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    if kv_types is not None:
        if args.levels:
            print("note: --levels is ignored with --kv-types (one model file)", file=sys.stderr)
        ladder = run_kv_ladder(found.path, kv_types, n_tokens=args.tokens, threads=args.threads,
                               model=found.label, say=say)
        # Not saved where the app looks (ladder_path): that file is the quant-level ladder.
        path = save(ladder, args.save) if args.save else None
        if args.json:
            print(json.dumps(ladder.to_dict(), indent=2))
        else:
            print(format_table(ladder))
            if path:
                print(f"\nsaved to {path}")
        return 0
    levels = store.family(found)
    if args.levels:
        wanted = {canonical(q) for q in args.levels.split(",") if q.strip()}
        levels = [m for m in levels if canonical(m.quant) in wanted]
    if not levels:
        raise ModelNotFoundError(f"no installed levels of {found.family} match {args.levels}")
    if len(levels) == 1:
        print(f"note: {found.family} has one installed level; `edge-infer quantize {found.label} "
              f"--from-f16 --to Q8_0,Q4_K_M` makes more", file=sys.stderr)
    ladder = run_ladder(levels, n_tokens=args.tokens, threads=args.threads, say=say)
    path = save(ladder)
    if args.save:
        save(ladder, args.save)
    if args.json:
        print(json.dumps(ladder.to_dict(), indent=2))
    else:
        print(format_table(ladder))
        print(f"\nsaved to {path}")
    return 0
