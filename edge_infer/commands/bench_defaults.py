"""`edge-infer bench-defaults`: edge-infer vs llama.cpp's llama-server, each with its own
defaults, idle and beside busy-loop processes (edge_infer/bench/defaults.py)."""

from __future__ import annotations


def register(sub) -> None:
    p = sub.add_parser("bench-defaults", help="edge-infer vs llama-server with their defaults: chat, a code "
                                              "edit, idle and on a busy machine")
    p.add_argument("--chat-model", default="smollm2", help="model for the chat passes (default smollm2)")
    p.add_argument("--code-model", default="qwen-coder", help="model for the code edit (default qwen-coder)")
    p.add_argument("--repeats", type=int, default=3, help="alternating runs per system (default 3)")
    p.add_argument("--busy-loops", type=int, default=2,
                   help="busy loops beside the servers in the second half (default 2; 0 = idle only)")
    p.add_argument("--busy-as", choices=("apart", "shared", "both"), default="both",
                   help="the busy loops as one program in a session of its own (apart: a program started "
                        "elsewhere), in the servers' session (shared: the kernel shares the CPU per thread), "
                        "or one pass each (default)")
    p.set_defaults(func=main)


def main(args) -> int:
    from edge_infer.bench import defaults
    from edge_infer.bench.memory import build_llama_server
    from edge_infer.commands.common import resolve_model

    if args.repeats < 1 or args.busy_loops < 0:
        raise SystemExit("--repeats must be 1 or more and --busy-loops 0 or more")
    smol, _ = resolve_model(args.chat_model)
    coder, _ = resolve_model(args.code_model)
    binary = build_llama_server()
    modes = {"apart": (True,), "shared": (False,), "both": (True, False)}[args.busy_as]
    loads = (defaults.IDLE, *(defaults.Busy(args.busy_loops, apart) for apart in modes if args.busy_loops))
    results = defaults.run(smol, coder, binary, args.repeats, loads, log=lambda m: print(m, flush=True))
    print(f"\n{defaults.machine()}")
    print(f"edge-infer vs llama-server, each with its defaults (model and port only), medians of {args.repeats} "
          "alternating runs; chat: 64-token replies (c=1: 16 requests, 3 beside busy loops; c=8: 16); code edit and "
          "new function: one streamed reply each (its first 160 tokens beside busy loops), which run for a second "
          "before each pass and cut it "
          f"at {defaults.BUSY_BUDGET_S:.0f} s; cores: CPU the "
          "server used over the pass; under busy / idle, tok/s and cores each busy over idle; busy loops 'apart': "
          "one program in a session of its own, 'shared': in the servers' session (the kernel "
          f"{'shares the CPU between sessions first' if defaults.autogroup() else 'does not group by session here'})")
    print(defaults.table(results, loads))
    print("\nedge-infer's CPU setting at the end of each pass (its governor: engine/cpu_share.py)")
    print(defaults.cpu_settings(results, loads))
    return 0
