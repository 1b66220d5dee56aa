"""`edge-infer import PATH`: copy a local GGUF file into the store (validated first)."""

from __future__ import annotations


def register(sub) -> None:
    p = sub.add_parser("import", help="add a local .gguf file to the model store",
                       description="Check that a local file is a whole GGUF model (every shard of a "
                                   "split one), then copy it into the store with its sha256.")
    p.add_argument("path", help="the .gguf file (for a split model: its -00001-of-0000N.gguf)")
    p.add_argument("--name", help="model name (default: the file name without its quant level)")
    p.add_argument("--quant", help="quant level (default: from the file name, else the header)")
    p.add_argument("--move", action="store_true", help="delete the original after copying")
    p.set_defaults(func=main)


def main(args) -> int:
    from edge_infer.store.importing import import_file
    from edge_infer.store.store import ModelStore
    from edge_infer.units import human_bytes

    store = ModelStore()
    m = import_file(store, args.path, name=args.name, quant=args.quant, move=args.move, progress=print)
    print(f"imported {m.label} ({human_bytes(m.size)}, sha256 {m.sha256[:12]}…): {m.path}")
    return 0
