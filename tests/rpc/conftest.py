"""Loopback RPC workers (`edge-infer worker` processes) with small memory caps."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from tests.remote.conftest import free_port

# SmolLM2 at ctx 512, one slot: about 210 MiB with its compute buffers. A worker that reports
# 200 MiB cannot hold it alone; two can.
CAP = "200MiB"


def require_rpc_plugin() -> None:
    """`make test` builds the RPC plug-in from source on every machine (no driver needed), so
    under CI its absence is a failure; a bare `pytest` without it skips, saying how to get it."""
    import os

    from edge_infer.engine.native.backend import lib_dir, rpc_plugin

    if rpc_plugin(lib_dir()) is None:
        missing = "no RPC plug-in installed: `make rpc` builds it (make test does)"
        (pytest.fail if os.environ.get("CI") else pytest.skip)(missing)


class Worker:
    def __init__(self, port: int | None = None, mem: str = CAP):
        self.port = port or free_port()
        self.endpoint = f"127.0.0.1:{self.port}"
        # One thread: on a 2-core machine two workers and the server share the cores, and
        # spinning threads of three processes would take turns for seconds.
        self.proc = subprocess.Popen([sys.executable, "-m", "edge_infer", "worker", "--port", str(self.port),
                                      "--mem", mem, "--threads", "1"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        from edge_infer.engine.devices.rpc import probe

        deadline = time.monotonic() + 60
        while True:
            try:
                probe(self.endpoint, timeout=1)
                return
            except Exception:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"worker did not start: {self.proc.stderr.read()}")
                time.sleep(0.1)

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(10)


@pytest.fixture
def workers():
    require_rpc_plugin()
    started = []

    def start(n: int = 2, **kw) -> list[Worker]:
        new = [Worker(**kw) for _ in range(n)]
        started.extend(new)
        return new

    yield start
    for w in started:
        w.kill()
