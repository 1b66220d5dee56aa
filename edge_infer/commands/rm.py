"""`edge-infer rm NAME`: delete an installed model; `--partials`: unfinished downloads.
Asks first unless --yes."""

from __future__ import annotations

import sys


def register(sub) -> None:
    p = sub.add_parser("rm", help="delete installed models or unfinished downloads",
                       description="Delete installed models by name (repo:QUANT, alias, alias:QUANT), "
                                   "or with --partials the bytes of unfinished downloads.")
    p.add_argument("names", nargs="*", metavar="NAME")
    p.add_argument("--partials", action="store_true",
                   help="delete unfinished downloads (the ones `pull` would resume)")
    p.add_argument("-y", "--yes", action="store_true", help="do not ask")
    p.set_defaults(func=main)


def main(args) -> int:
    from edge_infer.errors import ModelNotFoundError
    from edge_infer.units import human_bytes
    from edge_infer.store.store import ModelStore

    store = ModelStore()
    if args.partials:
        return _remove_partials(store, args.yes)
    if not args.names:
        raise ModelNotFoundError("name the models to delete (see `edge-infer list`), or pass --partials")
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
        confirmed = _confirm(f"delete {m.label} ({human_bytes(m.size)}, {m.path.parent})?", args.yes)
        if confirmed is None:
            return 2
        if not confirmed:
            print(f"kept {m.label}")
            continue
        store.remove(m)
        print(f"deleted {m.label} ({human_bytes(m.size)} freed)")
    return 0


def _remove_partials(store, yes: bool) -> int:
    from edge_infer.store.partials import discard_partial, list_partials
    from edge_infer.units import human_bytes

    partials = list_partials(store.root)
    if not partials:
        print("no unfinished downloads")
        return 0
    for p in partials:
        confirmed = _confirm(f"delete the unfinished download of {p.label} ({human_bytes(p.have)} of "
                             f"{human_bytes(p.size)})?", yes)
        if confirmed is None:
            return 2
        if not confirmed:
            print(f"kept {p.label}")
            continue
        discard_partial(p)  # refused (DownloadBusyError) while a pull is writing it
        print(f"deleted the unfinished download of {p.label} ({human_bytes(p.have)} freed)")
    return 0


def _confirm(question: str, yes: bool) -> bool | None:
    """True to go on; None when there is nobody to ask (no terminal and no --yes)."""
    if yes:
        return True
    if not sys.stdin.isatty():
        print(f"edge-infer: error: {question.rstrip('?')}: not without confirmation; pass --yes",
              file=sys.stderr)
        return None
    return input(f"{question} [y/N] ").strip().lower() in ("y", "yes")
