"""`edge-infer search QUERY`: GGUF model repos on the Hugging Face Hub."""

from __future__ import annotations

import json


def register(sub) -> None:
    p = sub.add_parser("search", help="find GGUF model repos on the Hugging Face Hub",
                       description="Search the hub for model repos that carry GGUF files "
                                   "(most downloaded first). HF_ENDPOINT selects a mirror.")
    p.add_argument("query", nargs="+", help="words to look for in repo names")
    p.add_argument("--limit", type=int, default=20, help="at most this many repos (default 20)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=main)


def main(args) -> int:
    from edge_infer.store.hub import HubClient

    found = HubClient().search(" ".join(args.query), limit=args.limit)
    if args.json:
        print(json.dumps([r.__dict__ | {"tags": list(r.tags)} for r in found], indent=2))
        return 0
    if not found:
        print(f"no GGUF repos match {' '.join(args.query)!r}")
        return 0
    width = max(len(r.repo) for r in found)
    print(f"{'REPO':<{width}}  {'DOWNLOADS':>10}  {'LIKES':>6}  UPDATED")
    for r in found:
        print(f"{r.repo:<{width}}  {r.downloads if r.downloads is not None else '?':>10}  "
              f"{r.likes if r.likes is not None else '?':>6}  {r.updated or '?'}")
    print("\n`edge-infer quants REPO` lists a repo's quant levels and whether they fit this machine.")
    return 0
