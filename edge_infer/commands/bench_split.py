"""`edge-infer bench-split`: a model on this machine alone vs split over two loopback RPC
workers vs as a remote model behind a second edge-infer (edge_infer/bench/split.py)."""

from __future__ import annotations


def register(sub) -> None:
    p = sub.add_parser("bench-split", help="local vs split over two RPC workers vs remote through edge-infer")
    p.add_argument("model", nargs="?", default="smollm2", help="model (default smollm2)")
    p.add_argument("--repeats", type=int, default=3, help="alternating runs per system (default 3)")
    p.add_argument("--concurrency", default="1,8", help="clients, comma-separated (default 1,8)")
    p.add_argument("--mem", default="200MiB",
                   help="what each worker reports (default 200MiB: SmolLM2 fits neither alone)")
    p.add_argument("--cores", type=int, help="CPU threads in all per system (default: the physical cores)")
    p.set_defaults(func=main)


def main(args) -> int:
    from edge_infer.bench import split
    from edge_infer.commands.common import resolve_model
    from edge_infer.config import EngineSettings

    model, _ = resolve_model(args.model)
    concurrency = tuple(int(c) for c in args.concurrency.split(","))
    cores = args.cores or EngineSettings().n_threads
    results = split.run(model, cores, args.mem, args.repeats, concurrency, log=lambda m: print(m, flush=True))
    print(f"\n{args.model}: on this machine vs split over two loopback workers (reporting {args.mem} each) vs "
          f"remote through a front edge-infer; {cores} threads per system; medians of {args.repeats} alternating "
          "runs, 64-token replies (c=1: 6 requests, c=N: 2N)")
    print(split.table(results, concurrency))
    return 0
