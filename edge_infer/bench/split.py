"""`edge-infer bench-split`: one model served three ways, side by side, alternating, medians
of several runs: on this machine alone; split over two loopback RPC workers (`edge-infer
worker`, each holding part of the layers); and as a remote model behind a second edge-infer
(the client talks to a front server that forwards to this one). Chat at 1 and 8 clients.

On one machine the split cannot be faster (the workers share its cores); what it measures
is what the split costs per token: the activations' round trips between the server and
each worker, every step."""

from __future__ import annotations

import contextlib
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from edge_infer.bench.http import ServerProcess, Target, free_port, run_http_pass, warm_up

SETTINGS = ("--ctx", "2048", "--parallel", "8", "--disk-cache", "0")  # the same for every system


@contextlib.contextmanager
def local(model, cores: int):
    with ServerProcess.ours(model, cores, 2048, 8, "--disk-cache", "0") as srv:
        yield srv.target


@contextlib.contextmanager
def split(model, cores: int, mem: str):
    """Two workers (a core each) and the server (the rest; at least one) on this machine."""
    ports = [free_port(), free_port()]
    workers = [subprocess.Popen([sys.executable, "-m", "edge_infer", "worker", "--port", str(p), "--mem", mem,
                                 "--threads", "1"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
               for p in ports]
    try:
        _wait_for_workers(ports)
        rpc = ",".join(f"127.0.0.1:{p}" for p in ports)
        with ServerProcess.ours(model, max(1, cores - 2), 2048, 8, "--disk-cache", "0", "--rpc", rpc) as srv:
            yield srv.target
    finally:
        for w in workers:
            w.kill()
            w.wait()


@contextlib.contextmanager
def remote(model, cores: int):
    """This machine's server behind a front edge-infer that serves it as a remote model."""
    with ServerProcess.ours(model, cores, 2048, 8, "--disk-cache", "0") as back:
        config = Path(tempfile.mkdtemp(prefix="ei-bench-")) / "models.toml"
        config.write_text(f'[models.big]\nremote = ["{back.target.base_url}"]\nremote_model = "{back.target.resolve_model()}"\n')
        # The front's own model stays idle: a request for "big" goes to the back server.
        with ServerProcess.ours(model, 1, 512, 1, "--models-config", str(config), "--disk-cache", "0") as front:
            yield Target(front.target.base_url, model="big")


def _wait_for_workers(ports: list[int]) -> None:
    import time

    from edge_infer.engine.devices.rpc import probe

    deadline = time.monotonic() + 60
    for p in ports:
        while True:
            try:
                probe(f"127.0.0.1:{p}", timeout=1)
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"worker on port {p} did not start")
                time.sleep(0.2)


def run(model, cores: int, mem: str, repeats: int, concurrency: tuple[int, ...], log=print) -> dict:
    """{(system, clients): [(tok/s, ttft s), ...]}, the systems alternating within each repeat."""
    # "local, 1 thread" is the split's control: each worker computes its layers on one thread,
    # so split minus it is what the round trips to the workers cost.
    systems = {"local": lambda: local(model, cores), "local, 1 thread": lambda: local(model, 1),
               "split over 2 workers": lambda: split(model, cores, mem),
               "remote via edge-infer": lambda: remote(model, cores)}
    out: dict = {}
    for rep in range(repeats):
        order = list(systems) if rep % 2 == 0 else list(reversed(systems))
        for name in order:
            with systems[name]() as target:
                warm_up(target)
                for c in concurrency:
                    r = run_http_pass(name, target, c, 6 if c == 1 else 2 * c, 64)
                    out.setdefault((name, c), []).append((r.agg_tok_s, r.ttft_p50_s, r.errors))
                    log(f"done: {name} c={c} run {rep + 1}: {r.agg_tok_s:.1f} tok/s, TTFT p50 "
                        f"{r.ttft_p50_s * 1000:.0f} ms, {r.errors} errors")
    return out


def table(results: dict, concurrency: tuple[int, ...]) -> str:
    rows = [["system", "clients", "tok/s", "x local", "ms/token", "TTFT p50 ms", "errors", "runs (tok/s)"]]
    for c in concurrency:
        base = statistics.median(t for t, _, _ in results[("local", c)])
        for name in ("local", "local, 1 thread", "split over 2 workers", "remote via edge-infer"):
            runs = results.get((name, c))
            if not runs:
                continue
            tok = statistics.median(t for t, _, _ in runs)
            ttft = statistics.median(f for _, f, _ in runs)
            per_token = 1000 * c / tok if tok else float("nan")  # each client's time per token
            rows.append([name, str(c), f"{tok:.1f}", f"{tok / base:.2f}", f"{per_token:.1f}", f"{ttft * 1000:.0f}",
                         str(sum(e for _, _, e in runs)), " / ".join(f"{t:.1f}" for t, _, _ in runs)])
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip() for r in rows)
