"""Argument parsing and wiring only. Each subcommand lives in edge_infer/commands/<name>.py
and exposes `register(subparsers)`, which adds its parser and sets `func(args) -> int`."""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys

from edge_infer import __version__

COMMANDS = ["tui", "run", "chat", "inspect", "provision", "bench", "serve", "loadtest",
            # the model manager (module import_ is the `import` command)
            "search", "quants", "pull", "list", "rm", "import_", "quantize", "ladder", "bench_memory", "bench_spec", "bench_models", "bench_defaults", "bench_split", "worker"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="edge-infer", description="Offline LLM inference on llama.cpp.")
    parser.add_argument("--version", action="version", version=f"edge-infer {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="show llama.cpp and engine logs")
    parser.add_argument("--cpu-variant", metavar="NAME",
                        help="ggml CPU backend to load (auto, or e.g. haswell, skylakex; env EDGE_INFER_CPU_VARIANT)")
    parser.add_argument("--extra-bufts", choices=["auto", "on", "off"],
                        help="llama.cpp extra buffer types (AMX, repacked weights); auto = off on AMX CPUs "
                             "(env EDGE_INFER_EXTRA_BUFTS)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"edge_infer.commands.{name}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    # Process-wide llama.cpp settings travel as environment variables, so a server or
    # benchmark process started from this one makes the same choice.
    if args.cpu_variant:
        os.environ["EDGE_INFER_CPU_VARIANT"] = args.cpu_variant
    if args.extra_bufts:
        os.environ["EDGE_INFER_EXTRA_BUFTS"] = args.extra_bufts
    if not getattr(args, "func", None):  # no command: open the app on the default model
        args = parser.parse_args((sys.argv[1:] if argv is None else list(argv)) + ["tui"])
    from edge_infer.errors import EdgeInferError

    try:
        return int(args.func(args) or 0)
    except EdgeInferError as exc:
        print(f"edge-infer: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
