"""A real uvicorn server on the real SmolLM2: one engine per module, served over TCP on a
free port and over a Unix socket at once (the same app)."""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from edge_infer.config import EngineSettings


# For modules whose tests compare two greedy replies (streamed and whole, one route and another):
# n-gram drafts make such runs part at near ties (a draft's positions round as one batch, README),
# so they are served without; drafts are tested where they are the subject (test_speculation).
REPEATABLE_GREEDY = {"draft_max": 0}


@dataclass
class Live:
    url: str          # http://127.0.0.1:PORT
    socket: str       # Unix socket path
    engine: object
    app: object

    @property
    def base(self) -> str:
        return self.url + "/v1"


def short_socket_path(name: str = "ei.sock") -> str:
    # AF_UNIX paths are limited to ~108 bytes; pytest's tmp_path can be longer.
    return str(Path(tempfile.mkdtemp(prefix="ei-")) / name)


def serve_logged(log: Path, *args) -> subprocess.Popen:
    """`edge-infer serve ARGS` as a process writing to `log` (a file, not a pipe: a full pipe
    would block the server's logging), returned once its start line is there or it ended."""
    with open(log, "w") as out:
        p = subprocess.Popen([sys.executable, "-m", "edge_infer", "serve", *map(str, args)],
                             stdout=out, stderr=subprocess.STDOUT, text=True)
    for _ in range(600):
        if "Ctrl-C stops" in log.read_text() or p.poll() is not None:
            break
        time.sleep(0.1)
    return p


def start_server(engine, **app_kwargs):
    from edge_infer.host import ModelHost
    from edge_infer.server.app import create_app
    from edge_infer.server.launch import BackgroundServer, bind_tcp, bind_unix

    host = ModelHost(on_demand=False)  # serves the engine it is given (many models: test_many_models.py)
    host.adopt(engine)
    app = create_app(host, **app_kwargs)
    tcp = bind_tcp("127.0.0.1", 0)
    path = short_socket_path()
    uds = bind_unix(path)
    bg = BackgroundServer(app, [tcp, uds]).start()
    return bg, Live(f"http://127.0.0.1:{tcp.getsockname()[1]}", path, engine, app)


@pytest.fixture(scope="module")
def make_served(smollm2_path):
    """make_served(api_key=None, **engine settings) -> Live; all stopped at module end."""
    from edge_infer.engine import Engine

    started = []

    def make(app_kwargs: dict | None = None, **settings):
        base = dict(ctx=1024, parallel=4, n_threads=2)
        base.update(settings)
        engine = Engine(smollm2_path, EngineSettings(**base), name="smollm2")
        bg, live = start_server(engine, **(app_kwargs or {}))
        started.append((bg, engine, live))
        return live

    yield make
    for bg, engine, live in started:
        bg.stop()
        engine.close()
        assert not Path(live.socket).exists()  # removed on stop
        Path(live.socket).parent.rmdir()


@pytest.fixture(scope="module")
def served(make_served) -> Live:
    return make_served()


@pytest.fixture
def client(served):
    from openai import OpenAI

    with OpenAI(base_url=served.base, api_key="unused", max_retries=0) as c:
        yield c
