"""`edge-infer chat MODEL`: a plain multi-turn chat in the terminal.

The engine reuses the KV cache of the previous turn, so only the new message is prefilled.
"""

from __future__ import annotations

import sys

from edge_infer.commands.common import (add_engine_args, add_model_arg, add_sampling_args,
                                        open_host, sampling_params)
from edge_infer.commands.run import format_stats

HELP = "commands: /reset starts over, /stats toggles speed lines, /quit (or Ctrl-D) leaves"


def register(sub) -> None:
    p = sub.add_parser("chat", help="multi-turn chat in the terminal")
    add_model_arg(p)
    p.add_argument("--system", help="system message")
    p.add_argument("--stats", action="store_true", help="show TTFT and tok/s after each reply")
    add_engine_args(p, parallel_default=1)
    add_sampling_args(p)
    p.set_defaults(func=main)


def main(args) -> int:
    from edge_infer.engine import Request
    from edge_infer.errors import EdgeInferError

    system = [{"role": "system", "content": args.system}] if args.system else []
    history: list[dict] = []
    show_stats = args.stats
    print(f"edge-infer chat — loading {args.model or 'the default model'} ...", file=sys.stderr)
    with open_host(args) as host:
        engine = host.get()
        print(f"{engine.name}: ready. {HELP}", file=sys.stderr)
        while True:
            try:
                line = input(">>> ")
            except EOFError:
                print()
                return 0
            except KeyboardInterrupt:
                print()
                return 0
            cmd = line.strip()
            if not cmd:
                continue
            if cmd in ("/quit", "/exit", "/bye"):
                return 0
            if cmd == "/reset":
                history.clear()
                print("(conversation cleared)")
                continue
            if cmd == "/stats":
                show_stats = not show_stats
                continue
            history.append({"role": "user", "content": line})
            try:
                stream = engine.submit(Request(messages=system + history, sampling=sampling_params(args),
                                               source="chat"))
            except EdgeInferError as exc:
                history.pop()
                print(f"edge-infer: {exc}", file=sys.stderr)
                continue
            reply = []
            try:
                for event in stream:
                    text = event.text
                    reply.append(text)
                    sys.stdout.write(text)
                    sys.stdout.flush()
            except KeyboardInterrupt:  # Ctrl-C stops this reply, not the chat
                stream.cancel()
                for event in stream:
                    reply.append(event.text)
            print()
            fin = stream.finished
            if fin and fin.error:
                print(f"edge-infer: {fin.error}", file=sys.stderr)
            history.append({"role": "assistant", "content": "".join(reply)})
            if show_stats and fin:
                print(format_stats(fin.stats, fin.reason), file=sys.stderr)
