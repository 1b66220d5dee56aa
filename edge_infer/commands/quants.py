"""`edge-infer quants REPO[@REVISION]`: a hub repo's GGUF files by quant level, with a
fit verdict for this machine from the file's real header (HTTP range reads only)."""

from __future__ import annotations

import json


def register(sub) -> None:
    p = sub.add_parser("quants", help="a hub repo's quant levels, sizes and fit verdicts",
                       description="List a hub repo's GGUF files grouped by quant level (split "
                                   "files as one entry) with their size and whether each fits this "
                                   "machine's RAM (and GPU memory) at --ctx and --parallel. The "
                                   "verdict comes from the model's GGUF header, read with HTTP "
                                   "range requests: nothing is downloaded.")
    p.add_argument("repo", metavar="REPO[@REVISION]", help="hub repo, e.g. bartowski/SmolLM2-360M-Instruct-GGUF")
    p.add_argument("--ctx", type=int, help="context per sequence (default: min(4096, trained context))")
    p.add_argument("--parallel", type=int, default=1, help="sequences decoded together (default 1)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    p.add_argument("--rpc", metavar="HOST:PORT,...",
                   help="count these workers' devices too (`edge-infer worker` on other machines)")
    p.set_defaults(func=main)


def main(args) -> int:
    from dataclasses import asdict

    from edge_infer.engine.devices.devices import this_machine
    from edge_infer.plan import plan_for
    from edge_infer.errors import EdgeInferError
    from edge_infer.units import human_bytes
    from edge_infer.store.hub import HubClient, parse_spec
    from edge_infer.store.pull import choose_level, level_fits

    repo, quant, revision = parse_spec(args.repo)
    client = HubClient()
    listing = client.listing(repo, revision)
    groups = listing.gguf_groups()
    if quant:
        groups = [g for g in groups if g.matches(quant)]
    if not groups:
        raise EdgeInferError(f"{repo} has no GGUF files{' at ' + quant if quant else ''}")
    from edge_infer.commands.common import rpc_endpoints

    machine = this_machine(rpc_endpoints(args.rpc) or ())
    fits = level_fits(client, listing, groups, machine, args.ctx, args.parallel)
    try:
        chosen = choose_level(fits)
    except EdgeInferError:
        chosen = None
    plan = plan_for(chosen.info, None, machine, ctx=args.ctx, parallel=args.parallel) if chosen else None
    ref = fits[0].info
    if args.json:
        print(json.dumps({
            "repo": repo, "revision": listing.revision, "commit": listing.commit,
            "header_bytes_read": client.bytes_read,
            "machine": asdict(machine),
            "model": {k: getattr(ref, k) for k in ("architecture", "block_count", "head_count", "head_count_kv",
                                                   "embedding_length", "context_length", "sliding_window",
                                                   "parameter_count")},
            "levels": [{"quant": lf.group.quant, "model": lf.group.stem, "size": lf.group.size,
                        "files": [f.path for f in lf.group.files], "sha256": [f.sha256 for f in lf.group.files],
                        "bits_per_weight": round(lf.group.size * 8 / max(1, ref.parameter_count), 2),
                        **lf.fit.to_dict()} for lf in fits],
            "recommended": chosen.group.quant if chosen else None,
            "plan": plan.to_dict() if plan else None,
        }, indent=2))
        return 0
    swa = f", sliding window {ref.sliding_window}" if any(ref.swa_layers) else ""
    print(f"{repo} @ {listing.commit[:12]} ({listing.revision})")
    print(f"  {ref.architecture}, {ref.parameter_count / 1e6:.0f}M parameters, {ref.block_count} layers, "
          f"{ref.head_count} heads ({ref.head_count_kv} KV), trained context {ref.context_length}{swa}")
    print(f"  header read by range request: {human_bytes(client.bytes_read)} (nothing downloaded)")
    print(f"  this machine: {machine.describe()}")
    print(f"  verdicts at ctx {fits[0].fit.ctx} x {args.parallel} sequence{'s' if args.parallel != 1 else ''}\n")
    gpu = bool(machine.devices)
    several = len({lf.group.stem for lf in fits}) > 1
    cols = ["QUANT", "SIZE", "BPW", "RAM NEED", "RAM"] + (["GPU NEED", "GPU"] if gpu else []) + ["FILE"]
    rows = []
    for lf in fits:
        g, f = lf.group, lf.fit
        name = g.first.path + (f"  (+{len(g.files) - 1} more parts)" if g.split else "")
        mark = " *" if chosen is lf else ""
        row = [g.quant + mark, human_bytes(g.size), f"{g.size * 8 / max(1, ref.parameter_count):.2f}",
               human_bytes(f.ram_need), f.ram]
        if gpu:
            row += [human_bytes(f.gpu_need or 0), f.gpu or "-"]
        rows.append(row + [name])
    widths = [max(len(c), *(len(r[i]) for r in rows)) for i, c in enumerate(cols)]
    print("  ".join(c.ljust(w) for c, w in zip(cols, widths)).rstrip())
    for r in rows:
        print("  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip())
    if chosen:
        print(f"\n* `edge-infer pull {repo}` would take {chosen.group.quant}: the highest precision up to "
              f"Q8_0 that fits. Plan: ctx {plan.ctx} x {plan.parallel}, {plan.n_gpu_layers} GPU layers, "
              f"{human_bytes(plan.estimate.total_bytes)} in all.")
    else:
        print("\nno level fits this machine at this context; try a smaller --ctx")
    if several:
        print("(this repo holds more than one model; levels are grouped by file name)")
    return 0
