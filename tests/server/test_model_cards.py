"""/v1/models for an installed model whose engine failed (a worker lost) and whose reload has
not succeeded: listed as unavailable with its file's size, not a 500 (it holds no memory)."""

from __future__ import annotations

from starlette.testclient import TestClient

from edge_infer.config import EngineSettings
from edge_infer.server.app import create_app
from tests.host.test_model_host import World


def test_an_installed_model_whose_engine_failed_is_listed_unavailable():
    with World().host() as host:
        host.load("gemma3", EngineSettings())
        host.failures["qwen"] = "worker 127.0.0.1:50052 is gone"
        client = TestClient(create_app(host))
        cards = {c["id"]: c for c in client.get("/v1/models").json()["data"]}
        assert cards["qwen"]["status"] == {"value": "unavailable"} and cards["qwen"]["size_bytes"] == 0
        assert "memory" not in cards["qwen"]
        assert cards["gemma3"]["status"]["value"] == "loaded" and "memory" in cards["gemma3"]
        assert client.get("/v1/models/qwen").json() == cards["qwen"]
