"""`edge-infer` (no command) and `edge-infer tui [MODEL]`: the Textual app."""

from __future__ import annotations

from edge_infer.commands.common import add_engine_args, add_model_arg, engine_settings
from edge_infer.config import serving_slots_default


def register(sub) -> None:
    p = sub.add_parser("tui", help="open the terminal app: chat, models, server, stats (the default)")
    add_model_arg(p)
    add_engine_args(p, parallel_default=serving_slots_default())
    p.set_defaults(func=main)


def main(args) -> int:
    from edge_infer.tui.app import run_app

    return run_app(getattr(args, "model", None), engine_settings(args))
