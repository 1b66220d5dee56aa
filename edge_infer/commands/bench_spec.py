"""`edge-infer bench-spec MODEL`: n-gram speculation on vs off, side by side in one run, on
repetitive work (quote, edit) and on plain questions alone and batched."""

from __future__ import annotations

from edge_infer.commands.common import add_model_arg, resolve_model


def register(sub) -> None:
    p = sub.add_parser("bench-spec", help="n-gram speculation on vs off: tok/s, acceptance, same output")
    add_model_arg(p)
    p.add_argument("--draft-max", type=int, default=15,
                   help="drafted tokens per step, at most, for the 'on' requests (default 15, as serve's)")
    p.add_argument("--workloads", default="quote,edit,plain", help="comma-separated: quote, edit, plain")
    p.add_argument("--clients", type=int, default=8, help="clients for the batched plain pass (0 = skip)")
    p.add_argument("--max-tokens", type=int, default=160)
    p.add_argument("--repeat", type=int, default=2, help="passes per side, alternating")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--ctx", type=int, default=2048)
    p.set_defaults(func=main)


def main(args) -> int:
    from edge_infer.bench import speculation as spec
    from edge_infer.config import EngineSettings
    from edge_infer.engine import Engine
    from edge_infer.engine.speculation import check_draft_max

    check_draft_max(args.draft_max)
    names = [w.strip() for w in args.workloads.split(",") if w.strip()]
    for n in names:
        if n not in ("quote", "edit", "plain"):
            raise SystemExit(f"--workloads: unknown workload {n!r}; choose from quote, edit, plain")
    path, name = resolve_model(args.model)
    passes = [(n, 1) for n in names]
    if args.clients > 1 and "plain" in names:
        passes.append(("plain", args.clients))
    rows = []
    for workload, clients in passes:
        # A fresh engine per pass: in the shared KV pool a sequence's logits shift slightly with
        # where its cells lie among earlier histories, which can flip a greedy near-tie; no disk
        # tier, so nothing an earlier run saved is restored.
        engine = Engine(path, EngineSettings.from_env(ctx=args.ctx, parallel=max(1, args.clients),
                                                      n_threads=args.threads, draft_max=args.draft_max,
                                                      disk_cache="0"), name=name)
        try:  # warm up: first decodes pay for page faults and thread start
            engine.generate(spec.Request(prompt="Hello", sampling=spec.SamplingParams(temperature=0.0, max_tokens=8)))
            rows.append(spec.measure(engine, workload, clients, args.max_tokens, args.repeat))
        finally:
            engine.close()
    print(spec.table(rows, args.draft_max))
    return 0
