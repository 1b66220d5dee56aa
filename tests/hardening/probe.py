"""Hardening probe for a live edge-infer (or any OpenAI-compatible) server.

Start a server, then point the probe at it:

    edge-infer serve smollm2 --port 8011 --parallel 8 &
    python tests/hardening/probe.py --url http://127.0.0.1:8011 --pid $!
    python tests/hardening/probe.py --unix /tmp/ei.sock --sections security
    python tests/hardening/probe.py --sections gguf --edge-infer .venv/bin/edge-infer \\
        --gguf ~/.local/share/edge-infer/models/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf

Sections (--sections, comma-separated; default all but gguf unless --gguf is given):
  load        many concurrent clients, mixed stream/non-stream: nothing lost, no 5xx
  disconnect  clients leaving mid-stream: no leaked slots, speed unchanged after
  fuzz        --fuzz N malformed requests + slowloris bodies: 4xx, no 5xx/hangs/crash/leak
              (--routes openai|agents|all: which routes)
  security    path traversal in model names, API key, CORS, body limit, socket mode
  gguf        corrupt GGUF files through `inspect`, `run`, `import`, `serve`

Prints a table per section and PASS/FAIL; exits 0 when every target is met, else 1.
--json OUT writes every figure and the failure examples. Needs only the stdlib and
httpx (psutil for --pid); it never imports edge_infer. The run_* functions of the
section modules are usable from pytest with reduced sizes.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

if not __package__:  # run as a script: make the sibling modules importable as a package
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    __package__ = "tests.hardening"

from .common import Target, format_table  # noqa: E402
from .corrupt_gguf import make_corrupt_ggufs, run_gguf  # noqa: E402,F401
from .fuzz import run_fuzz  # noqa: E402
from .load import run_disconnect, run_load  # noqa: E402
from .security import run_security  # noqa: E402

ALL = ("load", "disconnect", "fuzz", "security", "gguf")


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="Hardening probe for an OpenAI-compatible server.",
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", default=None, help="server base URL (default http://127.0.0.1:8000, "
                                               "or http://localhost with --unix)")
    p.add_argument("--unix", metavar="PATH", help="talk over this Unix socket")
    p.add_argument("--api-key", help="the server's API key (enables the auth checks)")
    p.add_argument("--pid", type=int, help="server pid, to read its RSS with psutil")
    p.add_argument("--sections", default=None, help=f"comma-separated, from {','.join(ALL)}")
    p.add_argument("--clients", type=int, default=64)
    p.add_argument("--requests-per-client", type=int, default=4)
    p.add_argument("--disconnects", type=int, default=100)
    p.add_argument("--fuzz", type=int, default=10_000, metavar="N", help="fuzz requests (default 10000)")
    p.add_argument("--fuzz-concurrency", type=int, default=16)
    p.add_argument("--routes", choices=("openai", "agents", "all"), default="openai",
                   help="which routes fuzz sends to: OpenAI chat and text completions (default), the agents' "
                        "(Anthropic Messages, Responses, infill, token utilities), or all")
    p.add_argument("--slow", type=int, default=20, help="slowloris connections during fuzz")
    p.add_argument("--slow-timeout", type=float, default=60.0, help="seconds a slow body may stay unanswered")
    p.add_argument("--timeout", type=float, default=60.0, help="per-request timeout in fuzz (a hang)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--edge-infer", metavar="CLI", help="edge-infer command for the gguf section")
    p.add_argument("--gguf", metavar="PATH", help="a real GGUF to derive corrupt files from")
    p.add_argument("--gguf-timeout", type=float, default=60.0)
    p.add_argument("--json", metavar="OUT", help="write all figures as JSON")
    args = p.parse_args(argv)
    args.url = args.url or ("http://localhost" if args.unix else "http://127.0.0.1:8000")
    default = [s for s in ALL if s != "gguf" or args.gguf]
    args.sections = args.sections.split(",") if args.sections else default
    unknown = set(args.sections) - set(ALL)
    if unknown:
        p.error(f"unknown sections: {', '.join(sorted(unknown))}")
    if "gguf" in args.sections and not (args.edge_infer and args.gguf):
        p.error("the gguf section needs --edge-infer CLI and --gguf FILE")
    return args


def run_section(name: str, args, target: Target) -> dict:
    def progress(msg):
        print(f"  .. {msg}", file=sys.stderr, flush=True)

    if name == "load":
        return run_load(target.url, args.clients, args.requests_per_client, target=target, seed=args.seed)
    if name == "disconnect":
        return run_disconnect(target.url, args.disconnects, target=target, seed=args.seed)
    if name == "fuzz":
        return run_fuzz(target.url, args.fuzz, args.seed, target=target, concurrency=args.fuzz_concurrency,
                        timeout=args.timeout, slow=args.slow, slow_timeout=args.slow_timeout, progress=progress,
                        routes=args.routes)
    if name == "security":
        return run_security(target.url, target=target)
    return run_gguf(args.edge_infer, args.gguf, timeout=args.gguf_timeout)


def main(argv=None) -> int:
    args = parse_args(argv)
    target = Target(args.url, api_key=args.api_key, unix=args.unix, pid=args.pid)
    results = []
    t0 = time.monotonic()
    for name in args.sections:
        print(f"-- running {name} ...", file=sys.stderr, flush=True)
        try:
            res = run_section(name, args, target)
        except Exception as exc:  # a section that cannot even run is a failed section, not a stop
            res = {"section": name, "ok": False, "elapsed_s": 0.0, "notes": [],
                   "figures": [{"name": "section error", "value": f"{type(exc).__name__}: {exc}",
                                "target": "none", "ok": False}], "values": {}, "examples": {}}
        results.append(res)
        print(format_table(res), flush=True)
        _print_examples(res)
    ok = all(r["ok"] for r in results)
    print(f"\nOVERALL: {'PASS' if ok else 'FAIL'} ({', '.join(r['section'] + ('' if r['ok'] else ' FAIL') for r in results)}; "
          f"{time.monotonic() - t0:.0f} s)")
    if args.json:
        Path(args.json).write_text(json.dumps({"ok": ok, "sections": results}, indent=2, default=str))
    return 0 if ok else 1


def _print_examples(res: dict, per_kind: int = 3) -> None:
    """A few failure examples under the table; --json has up to 10 of each."""
    for kind, items in res.get("examples", {}).items():
        print(f"  examples of {kind} ({len(items)} kept):")
        for item in items[:per_kind]:
            text = json.dumps(item, default=str, ensure_ascii=True) if not isinstance(item, str) else item
            print(f"    - {text[:400]}")


if __name__ == "__main__":
    sys.exit(main())
