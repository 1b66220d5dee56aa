"""`edge-infer quantize MODEL --to Q8_0,Q6_K,...`: new quant levels of an installed model,
made locally by llama.cpp, each a new store entry."""

from __future__ import annotations

import sys


def register(sub) -> None:
    p = sub.add_parser("quantize", help="make other quant levels of a model locally",
                       description="Quantize an installed model (or .gguf file) with llama.cpp. Each "
                                   "level becomes a store entry named MODEL:LEVEL. Quantizing an "
                                   "already quantized file, or going to a higher precision, is refused "
                                   "unless --allow-requantize; --from-f16 first widens a quantized "
                                   "model to F16 (the gguf package dequantizes it) and quantizes from "
                                   "there, which is how to build a ladder from one downloaded file.")
    p.add_argument("model", help="installed model name, alias or .gguf path")
    p.add_argument("--to", required=True, help="comma-separated levels, e.g. Q8_0,Q6_K,Q5_K_M,Q4_K_M")
    p.add_argument("--from-f16", action="store_true", help="widen the source to F16 first (kept as MODEL:F16)")
    p.add_argument("--allow-requantize", action="store_true",
                   help="quantize an already quantized file, or to a higher precision, anyway")
    p.add_argument("--threads", type=int, help="threads for llama.cpp (default: all cores)")
    p.add_argument("--force", action="store_true", help="redo levels that are already installed")
    p.set_defaults(func=main)


def main(args) -> int:
    from edge_infer.commands.progress import CountProgress
    from edge_infer.engine import quantize_file
    from edge_infer.store.quantize import plan_quantize, run_quantize
    from edge_infer.units import human_bytes

    targets = [t.strip() for t in args.to.split(",") if t.strip()]
    plan = plan_quantize(args.model, targets, from_f16=args.from_f16, allow_requantize=args.allow_requantize,
                         force=args.force)
    for note in plan.notes:
        print(f"note: {note}", file=sys.stderr)
    for m in plan.skipped:
        print(f"{m.label} is already installed ({human_bytes(m.size)}); --force redoes it")
    made = run_quantize(plan, quantizer=quantize_file, threads=args.threads,
                        progress=lambda label: CountProgress(label), say=print)
    for m in made:
        print(f"installed {m.label} ({human_bytes(m.size)}): {m.path}")
    return 0
