"""`edge-infer run MODEL "prompt"`: stream one completion to stdout."""

from __future__ import annotations

import sys

from edge_infer.commands.common import (add_engine_args, add_model_arg, add_sampling_args,
                                        open_host, sampling_params)


def register(sub) -> None:
    p = sub.add_parser("run", help="generate a completion for one prompt, streamed to stdout")
    add_model_arg(p)
    p.add_argument("prompt", help="the prompt ('-' reads it from stdin)")
    p.add_argument("--chat", action="store_true", help="wrap the prompt as a user message in the model's chat template")
    p.add_argument("--system", help="system message (with --chat)")
    p.add_argument("--stats", action="store_true", help="print TTFT, prefill and decode speed to stderr")
    add_engine_args(p, parallel_default=1)
    add_sampling_args(p)
    p.set_defaults(func=main)


def main(args) -> int:
    from edge_infer.engine import Request, TokenEvent

    prompt = sys.stdin.read() if args.prompt == "-" else args.prompt
    if args.chat:
        messages = ([{"role": "system", "content": args.system}] if args.system else [])
        request = Request(messages=messages + [{"role": "user", "content": prompt}],
                          sampling=sampling_params(args), source="cli")
    else:
        request = Request(prompt=prompt, sampling=sampling_params(args), source="cli")
    with open_host(args) as host:
        engine = host.get()
        stream = engine.submit(request)
        try:
            for event in stream:
                if isinstance(event, TokenEvent):
                    sys.stdout.write(event.text)
                    sys.stdout.flush()
                else:
                    sys.stdout.write(event.text + "\n")
                    if event.error:
                        print(f"edge-infer: error: {event.error}", file=sys.stderr)
                        return 1
        except KeyboardInterrupt:
            stream.cancel()
            return 130
        if args.stats:
            print(format_stats(stream.finished.stats, stream.finished.reason), file=sys.stderr)
    return 0


def format_stats(st, reason: str) -> str:
    return (f"[{st.prompt_tokens} prompt tokens ({st.cached_tokens} cached), {st.generated_tokens} generated, "
            f"finish={reason}] TTFT {st.ttft_s * 1000:.0f} ms, prefill {st.prefill_tok_s:.0f} tok/s, "
            f"decode {st.decode_tok_s:.1f} tok/s")
