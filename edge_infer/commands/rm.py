"""`edge-infer rm NAME`: delete an installed model (asks first unless --yes)."""

from __future__ import annotations

import sys


def register(sub) -> None:
    p = sub.add_parser("rm", help="delete installed models",
                       description="Delete installed models by name (repo:QUANT, alias, alias:QUANT).")
    p.add_argument("names", nargs="+", metavar="NAME")
    p.add_argument("-y", "--yes", action="store_true", help="do not ask")
    p.set_defaults(func=main)


def main(args) -> int:
    from edge_infer.errors import ModelNotFoundError
    from edge_infer.store.download import human
    from edge_infer.store.store import ModelStore

    store = ModelStore()
    chosen = []
    for name in args.names:
        found = store.matches(name)
        if not found:
            installed = ", ".join(m.label for m in store.installed()) or "none"
            raise ModelNotFoundError(f"no installed model is called {name!r}; installed: {installed}")
        if len(found) > 1:
            raise ModelNotFoundError(f"{name!r} names {len(found)} installed models "
                                     f"({', '.join(m.label for m in found)}); name one of them")
        chosen += [m for m in found if m not in chosen]
    for m in chosen:
        if not args.yes:
            if not sys.stdin.isatty():
                print(f"edge-infer: error: not deleting {m.label} without confirmation; pass --yes",
                      file=sys.stderr)
                return 2
            answer = input(f"delete {m.label} ({human(m.size)}, {m.path.parent})? [y/N] ").strip().lower()
            if answer not in ("y", "yes"):
                print(f"kept {m.label}")
                continue
        store.remove(m)
        print(f"deleted {m.label} ({human(m.size)} freed)")
    return 0
