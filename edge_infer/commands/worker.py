"""`edge-infer worker`: this machine's CPU (or GPUs) for a model that another machine's
`serve --rpc` splits across machines (llama.cpp's RPC server, from the same library as the
client: libggml-rpc, `make rpc`)."""

from __future__ import annotations

import os
import signal
import sys
import threading


def register(sub) -> None:
    p = sub.add_parser("worker", help="lend this machine's devices to another machine's `serve --rpc`",
                       description="Run llama.cpp's RPC server: another machine's `edge-infer serve MODEL "
                                   "--rpc HOST:PORT` places layers here. llama.cpp's RPC has no "
                                   "authentication and no encryption: it listens on 127.0.0.1 unless "
                                   "--allow-network; between machines use an SSH tunnel or a VPN.")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=50052, help="port (default 50052, llama.cpp's)")
    p.add_argument("--mem", metavar="SIZE",
                   help="report at most SIZE (e.g. 6GiB) to clients: their plans place no more here")
    p.add_argument("--device", metavar="NAMES",
                   help="devices to serve, comma-separated (default: the GPUs, else the CPU; "
                        "`edge-infer inspect` lists them)")
    p.add_argument("--threads", type=int, help="CPU threads (default: the physical cores)")
    p.add_argument("--no-cache", action="store_true",
                   help="do not keep the weights clients send (a second load sends them again)")
    p.add_argument("--allow-network", action="store_true",
                   help="listen on a non-loopback --host although anyone who reaches it can use it")
    p.set_defaults(func=main)


def main(args) -> int:
    from edge_infer.config import EngineSettings
    from edge_infer.engine.devices.devices import list_devices
    from edge_infer.engine.devices.rpc import serve_devices
    from edge_infer.errors import WorkerError
    from edge_infer.paths import rpc_cache_dir
    from edge_infer.server.launch import bind_tcp, is_loopback
    from edge_infer.units import human_bytes, parse_size

    if not is_loopback(args.host) and not args.allow_network:
        raise WorkerError(f"refusing to listen on {args.host}: llama.cpp's RPC has no authentication or "
                          "encryption, so anyone who reaches it could run code on this machine's devices "
                          "and read what is sent. Use an SSH tunnel or a VPN (README: More than one "
                          "machine), or pass --allow-network on a network you trust")
    if not is_loopback(args.host):
        print(f"edge-infer worker: WARNING: listening on {args.host} without authentication or encryption",
              file=sys.stderr)
    if args.mem:
        try:
            os.environ["EDGE_INFER_RPC_MEM"] = str(parse_size(args.mem, "--mem"))
        except ValueError as exc:
            raise WorkerError(str(exc)) from None
    bind_tcp(args.host, args.port).close()  # a taken port fails here, in one line
    devices = list_devices()
    if args.device:
        names = [n.strip() for n in args.device.split(",") if n.strip()]
    else:  # as rpc-server: the GPUs if any, else the CPU
        names = [d.name for d in devices if d.kind != "cpu" and d.kind != "remote"] or \
                [d.name for d in devices if d.kind == "cpu"]
    threads = args.threads or EngineSettings().n_threads
    cache = None if args.no_cache else str(rpc_cache_dir())
    if cache:
        os.makedirs(cache, exist_ok=True)
    endpoint = f"{args.host}:{args.port}"
    shown = {d.name: d for d in devices}
    lines = [f"{n}: {human_bytes(shown[n].free_bytes)} free" if n in shown else n for n in names]
    cap = f"; reports at most {human_bytes(int(os.environ['EDGE_INFER_RPC_MEM']))}" if args.mem else ""
    print(f"edge-infer worker: serving {', '.join(lines)} at {endpoint}{cap}, {threads} threads\n"
          f"  weights cache {cache or 'off'}\n  on the other machine: edge-infer serve MODEL --rpc {endpoint}"
          f"\n  Ctrl-C stops", file=sys.stderr, flush=True)
    failed: list[BaseException] = []

    def run():
        try:
            serve_devices(endpoint, names, threads, cache)
        except BaseException as exc:  # a bad device name: said by the main thread
            failed.append(exc)
        done.set()

    done = threading.Event()
    # llama.cpp's server loop never returns and holds no Python signal handling: it runs in a
    # thread, and the main thread ends the process on Ctrl-C or SIGTERM.
    signal.signal(signal.SIGTERM, lambda *a: done.set())
    threading.Thread(target=run, name="edge-infer-rpc-server", daemon=True).start()
    try:
        while not done.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass
    if failed:
        raise failed[0]
    return 0  # the server thread (a daemon, inside llama.cpp) ends with the process
