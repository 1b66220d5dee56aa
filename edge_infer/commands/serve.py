"""`edge-infer serve MODEL`: the OpenAI-compatible API on loopback TCP or a Unix socket."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

from edge_infer.commands.common import add_engine_args, add_model_arg, open_host


def register(sub) -> None:
    p = sub.add_parser("serve", help="OpenAI-compatible API (chat, completions, streaming, /metrics)")
    add_model_arg(p)
    g = p.add_argument_group("server")
    g.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default 127.0.0.1; others need an API key)")
    g.add_argument("--port", type=int, default=8080)
    g.add_argument("--socket", metavar="PATH", help="listen on a Unix socket (mode 0600) instead of TCP")
    g.add_argument("--api-key", help="require 'Authorization: Bearer KEY' (visible in ps: prefer "
                                     "--api-key-file or EDGE_INFER_API_KEY)")
    g.add_argument("--api-key-file", metavar="FILE", help="read the API key from FILE")
    g.add_argument("--max-body-mib", type=float, default=8, help="largest request body accepted (413 above)")
    g.add_argument("--log-level", default="warning", choices=["debug", "info", "warning", "error"],
                   help="uvicorn's log level; 'info' also logs each request")
    add_engine_args(p)
    p.set_defaults(func=main)


def api_key(args) -> str | None:
    if args.api_key_file:
        key = Path(args.api_key_file).expanduser().read_text().strip()
    else:
        key = args.api_key or os.environ.get("EDGE_INFER_API_KEY")
    return key or None


def main(args) -> int:
    from edge_infer.server.app import create_app
    from edge_infer.server.launch import bind_tcp, bind_unix, check_exposure, remove_unix, uvicorn_server

    key = api_key(args)
    if not args.socket:
        check_exposure(args.host, key)
    # Bind before loading the model: a taken port or a live socket fails in milliseconds.
    sock = bind_unix(args.socket) if args.socket else bind_tcp(args.host, args.port)
    # uvicorn re-raises the signal that stopped it; make SIGTERM an exception, not a
    # silent death, so the finally below still removes the socket file.
    signal.signal(signal.SIGTERM, _exit_on_term)
    host = None
    try:
        parallel = args.parallel or (None if "EDGE_INFER_PARALLEL" in os.environ else 4)
        host = open_host(args, parallel=parallel)
        engine = host.get()
        app = create_app(host, api_key=key, max_body=int(args.max_body_mib * 2**20))
        if args.socket:
            where = f"unix:{Path(args.socket).expanduser()}  (curl --unix-socket PATH http://localhost/v1/models)"
        else:
            host = f"[{args.host}]" if ":" in args.host else args.host
            where = f"http://{host}:{sock.getsockname()[1]}/v1"
        s = engine.settings
        print(f"edge-infer: serving {engine.name} at {where}\n  {s.parallel} slots x {engine.n_ctx_seq} "
              f"tokens, {s.n_threads} threads, API key {'required' if key else 'off'}; Ctrl-C stops",
              file=sys.stderr, flush=True)
        uvicorn_server(app, args.log_level).run(sockets=[sock])
    finally:
        sock.close()
        if args.socket:
            remove_unix(args.socket)
        if host is not None:
            host.close()
    return 0


def _exit_on_term(signum, frame):
    raise SystemExit(0)
