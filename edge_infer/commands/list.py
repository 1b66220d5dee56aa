"""`edge-infer list`: installed models with quant, size, source and a fit verdict."""

from __future__ import annotations

import json


def register(sub) -> None:
    p = sub.add_parser("list", aliases=["ls"], help="installed models",
                       description="Installed models: name, quant level, size, where it came from, and "
                                   "whether it fits this machine at --ctx x --parallel. Unfinished "
                                   "downloads are listed below the table, never as models.")
    p.add_argument("--ctx", type=int, help="context per sequence for the verdict (default min(4096, trained))")
    p.add_argument("--parallel", type=int, default=1, help="sequences for the verdict (default 1)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.add_argument("--rpc", metavar="HOST:PORT,...",
                   help="count these workers' devices too (`edge-infer worker` on other machines)")
    p.set_defaults(func=main)


def main(args) -> int:
    from edge_infer.engine.devices.devices import this_machine
    from edge_infer.plan import fit_verdict
    from edge_infer.errors import ModelFileError
    from edge_infer.store.partials import list_partials
    from edge_infer.units import human_bytes
    from edge_infer.gguf.info import read_model_info
    from edge_infer.gguf.quant_types import bits_per_weight
    from edge_infer.store.store import ModelStore

    store = ModelStore()
    from edge_infer.commands.common import rpc_endpoints

    machine = this_machine(rpc_endpoints(args.rpc) or ())
    rows = []
    # Per model, the highest precision first.
    models = sorted(store.installed(), key=lambda m: (m.family.lower(), -bits_per_weight(m.quant)))
    for m in models:
        try:
            fit = fit_verdict(read_model_info(m.path), machine, args.ctx, args.parallel)
            verdict = fit.best if fit.gpu is None else f"RAM {fit.ram}, GPU {fit.gpu}"
        except ModelFileError as exc:
            fit, verdict = None, f"damaged: {exc}"
        rows.append((m, fit, verdict))
    partials = list_partials(store.root)
    if args.json:
        print(json.dumps({"models": [m.to_dict() | {"fit": fit.to_dict() if fit else None, "verdict": v}
                                     for m, fit, v in rows],
                          "partial_downloads": [{"file": p.label, "have": p.have, "size": p.size}
                                                for p in partials]}, indent=2))
        return 0
    if not rows:
        print(f"no models installed in {store.root}. `edge-infer provision` installs the default one, "
              f"`edge-infer pull REPO` one from the hub, `edge-infer import FILE.gguf` a local file.")
    else:
        table = [("NAME", "QUANT", "SIZE", "SOURCE", "FITS")]
        table += [(m.family, m.quant, human_bytes(m.size), m.source,
                   v) for m, _, v in rows]
        widths = [max(len(r[i]) for r in table) for i in range(5)]
        for r in table:
            print("  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip())
    for p in partials:
        print(f"unfinished download: {p.label} ({human_bytes(p.have)} of {human_bytes(p.size)}); "
              f"run the same `edge-infer pull` to resume it")
    return 0
