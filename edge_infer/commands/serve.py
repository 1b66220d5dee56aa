"""`edge-infer serve MODEL`: the OpenAI-compatible API on loopback TCP or a Unix socket."""

from __future__ import annotations

import logging
import os
import signal
import sys
from pathlib import Path

from edge_infer.commands.common import add_engine_args, add_model_arg
from edge_infer.config import serving_slots_default


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
    g.add_argument("--api-keys-file", metavar="FILE",
                   help="named keys with scopes (inference, admin) and models they may use (TOML; README)")
    g.add_argument("--allowed-host", action="append", default=[], metavar="NAME",
                   help="answer requests whose Host is NAME, besides localhost, loopback and the address "
                        "served on (repeatable; * = any, behind a reverse proxy)")
    g.add_argument("--max-body-mib", type=float, default=8, help="largest request body accepted (413 above)")
    g.add_argument("--log-level", default="warning", choices=["debug", "info", "warning", "error"],
                   help="uvicorn's log level; 'info' also logs each request")
    g.add_argument("--cors-origin", action="append", default=[], metavar="ORIGIN",
                   help="let web pages from ORIGIN (e.g. https://chat.example.com, or *) call the API "
                        "(repeatable; loopback origins such as http://localhost:3000 always may)")
    m = p.add_argument_group("models (any installed model loads on its first request)")
    m.add_argument("--models-budget", metavar="SIZE",
                   help="memory all loaded models may plan for together: 6GiB, 4096MiB "
                        "(default: 90%% of the RAM free at start); idle models are unloaded for room")
    m.add_argument("--max-models", type=int, default=0, metavar="N",
                   help="at most N models loaded at once (default 0 = as many as the budget holds)")
    m.add_argument("--keep-alive", default=None, metavar="DURATION",
                   help="unload a model this long after its last request: 30s, 5m, 1h; 0 = at once; "
                        "-1 = only when another needs the room (default -1; a request's keep_alive wins)")
    m.add_argument("--pin", action="store_true", help="never unload MODEL (the one loaded at start)")
    m.add_argument("--models-config", metavar="FILE",
                   help="per-model ctx, slots, KV types, keep_alive, pin (TOML; default "
                        "~/.config/edge-infer/models.toml when it exists)")
    m.add_argument("--only", dest="on_demand", action="store_false",
                   help="serve MODEL only: no other model loads on request")
    add_engine_args(p, parallel_default=serving_slots_default())
    p.set_defaults(func=main)


def api_key(args) -> str | None:
    if args.api_key_file:
        key = Path(args.api_key_file).expanduser().read_text().strip()
    else:
        key = args.api_key or os.environ.get("EDGE_INFER_API_KEY")
    return key or None


def main(args) -> int:
    from edge_infer.server.app import create_app
    from edge_infer.server.keys import Keyring
    from edge_infer.server.launch import bind_tcp, bind_unix, check_exposure, remove_unix, uvicorn_server

    key = api_key(args)
    keys = Keyring.load(args.api_keys_file, key)  # a bad keys file fails before anything is bound
    if not args.socket:
        check_exposure(args.host, key, args.api_keys_file)
    if args.log_level in ("info", "debug"):  # each request with its key's name (never the key)
        access = logging.getLogger("edge_infer.access")
        access.setLevel(logging.INFO)
        access.addHandler(logging.StreamHandler())  # stderr, beside uvicorn's own lines
    # Bind before loading the model: a taken port or a live socket fails in milliseconds.
    sock = bind_unix(args.socket) if args.socket else bind_tcp(args.host, args.port)
    # uvicorn re-raises the signal that stopped it; make SIGTERM an exception, not a
    # silent death, so the finally below still removes the socket file.
    signal.signal(signal.SIGTERM, _exit_on_term)
    host = None
    try:
        host = serving_host(args)
        engine = host.get()
        app = create_app(host, keys=keys, max_body=int(args.max_body_mib * 2**20), cors_origins=args.cors_origin,
                         allowed_hosts=args.allowed_host + host.config.server.allowed_hosts)
        if args.socket:
            where = f"unix:{Path(args.socket).expanduser()}  (curl --unix-socket PATH http://localhost/v1/models)"
        else:
            addr = f"[{args.host}]" if ":" in args.host else args.host
            where = f"http://{addr}:{sock.getsockname()[1]}/v1"
        s = engine.settings
        others = len(host.servable_names()) - 1
        more = (f"; {others} other installed model{'s' * (others != 1)} load on request within "
                f"{host.budget}" if host.on_demand and others > 0 else "")
        print(f"edge-infer: serving {engine.name} at {where}\n  {s.parallel} slots x {engine.n_ctx_seq} "
              f"tokens, {s.n_threads} threads, {where_layers(engine)}, API key {'required' if keys else 'off'}"
              f"{more}\n  {cache_line(engine)}{remote_lines(host)}; Ctrl-C stops", file=sys.stderr, flush=True)
        uvicorn_server(app, args.log_level).run(sockets=[sock])
    finally:
        sock.close()
        if args.socket:
            remove_unix(args.socket)
        if host is not None:
            host.close()
    return 0


def remote_lines(host) -> str:
    """One line per remote model of the models config: its name here, there, and where."""
    return "".join(f"\n  remote model {m.name} (as {m.remote_model} at {', '.join(u.url for u in m.upstreams)})"
                   for m in host.remotes.models.values())


def cache_line(engine) -> str:
    """'prompt cache 2.0 GiB RAM + 4.0 GiB disk (/home/u/.cache/edge-infer/kv)'."""
    from edge_infer.units import human_bytes

    snap = engine.snapshot()
    on_disk = (f"no disk tier: {snap.disk_cache_off_reason}" if snap.disk_cache_off_reason
               else f"{human_bytes(snap.disk_cache_cap_bytes)} disk ({snap.disk_cache_folder})")
    return f"prompt cache {human_bytes(snap.prompt_cache_cap_bytes)} RAM + {on_disk}"


def where_layers(engine) -> str:
    """'CPU only', or 'Vulkan0: 31 of 31 layers' (every device that holds layers)."""
    plan = engine.placement.plan
    on = [f"{d}: {n} of {plan.n_layer_slots} layers" for d, n, _ in plan.placement() if d != "CPU" and n]
    return ", ".join(on) if on else "CPU only"


def serving_host(args):
    """A host with MODEL loaded, ready to load the other installed models on request."""
    from edge_infer.commands.common import engine_settings
    from edge_infer.errors import EdgeInferError
    from edge_infer.host import FOREVER, ModelHost, parse_keep_alive
    from edge_infer.host.model_config import load_models_config
    from edge_infer.host.residency import machine_budget
    from edge_infer.paths import models_config_path
    from edge_infer.units import parse_size

    given = Path(args.models_config).expanduser() if args.models_config else None
    config = load_models_config(given or models_config_path(), required=given is not None)
    keep_alive = FOREVER if args.keep_alive is None else parse_keep_alive(args.keep_alive)
    if args.max_models < 0:
        raise EdgeInferError("--max-models must be 0 (no limit) or more")
    try:
        ram = parse_size(args.models_budget, "--models-budget") if args.models_budget else None
    except ValueError as exc:
        raise EdgeInferError(str(exc)) from None
    settings = engine_settings(args)
    host = ModelHost(budget=machine_budget(ram, args.max_models), settings=settings, config=config,
                     keep_alive=keep_alive, on_demand=args.on_demand)
    try:
        host.load(args.model, settings, pin=args.pin)
    except BaseException:
        host.close()
        raise
    return host


def _exit_on_term(signum, frame):
    raise SystemExit(0)
