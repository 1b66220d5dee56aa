"""A front edge-infer server whose models config names remote models (no local model)."""

from __future__ import annotations

import pytest

from edge_infer.host import ModelHost
from edge_infer.host.model_config import ModelsConfig
from edge_infer.server.app import create_app
from edge_infer.server.launch import BackgroundServer, bind_tcp
from tests.remote.standin import StandIn


class Front:
    def __init__(self, models: dict, api_key: str | None = None):
        self.host = ModelHost(config=ModelsConfig.model_validate({"models": models}), on_demand=False)
        sock = bind_tcp("127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        self.server = BackgroundServer(create_app(self.host, api_key=api_key), [sock]).start()

    def stop(self) -> None:
        self.server.stop()
        self.host.close()


@pytest.fixture
def front():
    made = []

    def make(models: dict, **kw) -> Front:
        f = Front(models, **kw)
        made.append(f)
        return f

    yield make
    for f in made:
        f.stop()


@pytest.fixture
def standin():
    made = []

    def make(**kw) -> StandIn:
        s = StandIn(**kw)
        made.append(s)
        return s

    yield make
    for s in made:
        s.stop()


def free_port() -> int:
    sock = bind_tcp("127.0.0.1", 0)
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there now: connections are refused
    return port
