"""llama.cpp's own C++ `llama-server` as a baseline process: built once from the llama.cpp our
wheel vendors (packaging/llama_server.py), started with the settings edge-infer would use.

"Matching settings" means: the same threads, slots, context per slot, flash attention
(auto), batch sizes, prompt cache size, and the same CPU buffer types. The last one is
decided by edge-infer per CPU (engine/native/cpu.py: extra buffer types off on AMX, where they
crash llama.cpp; on elsewhere), so we ask a fresh edge-infer process what it decided rather
than guessing here.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys

from edge_infer.bench.http import ServerProcess, free_port

_PACKAGING = os.path.join(os.path.dirname(__file__), "..", "..", "packaging", "llama_server.py")


def build() -> str:
    """The binary's path, building it first if it is not cached (a few minutes, once)."""
    out = subprocess.run([sys.executable, _PACKAGING], check=True, capture_output=True, text=True)
    return out.stdout.strip().splitlines()[-1]


@functools.cache
def edge_infer_uses_extra_bufts() -> bool:
    """What edge-infer's backend set-up decides on this CPU (in a child: loading llama.cpp's
    backends here would pin this bench process to them)."""
    code = ("import json; from edge_infer.engine.native.llama import init_backend; "
            "print(json.dumps(init_backend().use_extra_bufts))")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    return bool(json.loads(out.stdout.strip().splitlines()[-1]))


def process(binary: str, model_path, threads: int, ctx_total: int, parallel: int, cache_ram_mib: int,
            extra: list[str] = (), label: str | None = None) -> ServerProcess:
    """llama-server with `ctx_total` cells split over `parallel` slots (its -c is the total)."""
    port = free_port()
    argv = [binary, "-m", str(model_path), "--host", "127.0.0.1", "--port", str(port), "-t", str(threads),
            "-tb", str(threads), "-c", str(ctx_total), "-np", str(parallel), "-fa", "auto",
            "-b", "512", "-ub", "512", "--cache-ram", str(cache_ram_mib), "--no-warmup", *extra]
    if not edge_infer_uses_extra_bufts():
        argv.append("--no-repack")   # as edge-infer on this CPU (AMX: SIGILL/segfault otherwise)
    env = dict(os.environ, LD_LIBRARY_PATH=os.path.dirname(binary))  # its libraries lie next to it
    label = label or f"llama-server -c {ctx_total} -np {parallel} --cache-ram {cache_ram_mib}"
    return ServerProcess(label, argv, port, env=env)
