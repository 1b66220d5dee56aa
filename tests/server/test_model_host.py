"""The server asks its model host for an engine on every request: a model loaded into the
host while it serves (the app's Models tab does this) is the one served next."""

from __future__ import annotations

import httpx

from edge_infer.config import EngineSettings
from tests.server.test_errors import error_of


def test_a_model_loaded_while_serving_is_served_next(make_served, smollm2_path):
    from edge_infer.engine import Engine

    live = make_served(parallel=1, ctx=512)
    host = live.app.state.server.host
    before = httpx.post(live.base + "/completions", json={"model": "smollm2", "prompt": "Hi", "max_tokens": 2})
    assert before.status_code == 200 and before.json()["model"] == "smollm2"

    host.adopt(Engine(smollm2_path, EngineSettings(ctx=512, parallel=1, n_threads=2), name="smol-b"))
    assert live.engine.alive is False                      # the old engine was closed
    assert [m["id"] for m in httpx.get(live.base + "/models").json()["data"]] == ["smol-b"]
    gone = httpx.post(live.base + "/completions", json={"model": "smollm2", "prompt": "Hi", "max_tokens": 2})
    assert gone.status_code == 404 and "this server serves 'smol-b'" in error_of(gone)["message"]
    now = httpx.post(live.base + "/completions", json={"prompt": "Hi", "max_tokens": 2})
    assert now.status_code == 200 and now.json()["model"] == "smol-b"
    health = httpx.get(live.url + "/health").json()
    assert health["status"] == "ok" and health["model"] == "smol-b"
    metrics = httpx.get(live.url + "/metrics").text
    assert 'edge_infer_slots_total{model="smol-b"} 1.0' in metrics

    host.unload()
    assert httpx.get(live.url + "/health").status_code == 503
    assert httpx.get(live.base + "/models").json()["data"] == []
