"""A worker killed while its model streams: that model's requests end with a clear 503, the
server keeps serving its other models, /health says degraded, and once the worker is back
the next request loads the model again. A worker that does not answer at load is one line."""

from __future__ import annotations

import subprocess
import sys
import time

import httpx
import openai
import pytest

from edge_infer.config import EngineSettings
from edge_infer.engine import Engine
from edge_infer.host import ModelHost
from edge_infer.server.app import create_app
from edge_infer.server.launch import BackgroundServer, bind_tcp
from tests.remote.conftest import free_port
from tests.rpc.conftest import Worker

ASK = [{"role": "user", "content": "Tell me a long story about a lighthouse."}]


@pytest.fixture
def split_server(workers, smollm2_path, tmp_path):
    a, b = workers(2)
    host = ModelHost(on_demand=False)
    split_file = tmp_path / "split.gguf"  # the host tells models apart by their file
    split_file.symlink_to(smollm2_path)
    host.load(str(split_file), EngineSettings(ctx=512, parallel=2, n_threads=1, draft_max=0,
                                                rpc=(a.endpoint, b.endpoint)), name="split")
    host.adopt(Engine(smollm2_path, EngineSettings(ctx=512, parallel=2, n_threads=1)), name="local")
    sock = bind_tcp("127.0.0.1", 0)
    server = BackgroundServer(create_app(host), [sock]).start()
    yield f"http://127.0.0.1:{sock.getsockname()[1]}", b
    server.stop()
    host.close()


def test_a_worker_killed_mid_stream(split_server, workers):
    url, worker = split_server
    client = openai.OpenAI(base_url=url + "/v1", api_key="x", max_retries=0)
    stream = client.chat.completions.create(model="split", messages=ASK, max_tokens=400, stream=True,
                                            extra_body={"ignore_eos": True})
    seen = 0
    with pytest.raises(openai.APIError) as err:
        for _ in stream:
            seen += 1
            if seen == 3:
                worker.kill()
    assert "split is unavailable" in str(err.value) and seen < 400

    health = httpx.get(url + "/health").json()
    assert health["status"] == "degraded" and "split" in health["unavailable"]
    local = client.chat.completions.create(model="local", messages=ASK, max_tokens=8, temperature=0)  # others serve on
    assert local.choices[0].message.content

    with pytest.raises(openai.APIStatusError) as down:  # while it is gone: 503 naming the worker
        client.chat.completions.create(model="split", messages=ASK, max_tokens=8)
    assert down.value.status_code == 503 and worker.endpoint in down.value.message
    assert httpx.get(url + "/v1/models").json()["data"][0]["status"]["value"] in ("unavailable", "loaded")

    Worker(port=worker.port)  # back on the same address (the fixture's workers() stops the others)
    try:
        again = client.chat.completions.create(model="split", messages=ASK, max_tokens=8, temperature=0)
        assert again.choices[0].message.content
        assert httpx.get(url + "/health").json()["status"] == "ok"
    finally:
        subprocess.run(["pkill", "-f", f"worker --port {worker.port}"], check=False)


def test_a_worker_that_does_not_answer_at_load_is_one_line(smollm2_path):
    port = free_port()
    t0 = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "edge_infer", "serve", str(smollm2_path), "--port", "0",
                           "--rpc", f"127.0.0.1:{port}"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and time.monotonic() - t0 < 60
    assert done.stderr.strip().splitlines()[-1] == (f"edge-infer: error: worker 127.0.0.1:{port} does not "
                                                    "answer: Connection refused")


def test_a_lost_worker_blocks_only_the_model_it_was_named_for(workers, smollm2_path, gemma3_path, caplog):
    """`serve smollm2 --rpc A,B`, A gone: smollm2 waits for it (503 naming it), while gemma3,
    loaded on request with the server's settings, loads without A (it fits this machine), with
    one warning; before, every model loaded on demand was refused with A's error."""
    from edge_infer.errors import WorkerError
    from edge_infer.host.sources import Source, names_of

    a, b = workers(2)
    settings = EngineSettings(ctx=512, parallel=1, n_threads=1, draft_max=0, rpc=(a.endpoint, b.endpoint))
    sources = {"gemma3": Source(gemma3_path, "gemma3", names_of(gemma3_path))}
    host = ModelHost(on_demand=True, settings=settings, find_source=sources.get, list_sources=lambda: list(sources.values()))
    try:
        a.kill()
        with pytest.raises(WorkerError, match=f"worker {a.endpoint} does not answer"):
            host.load(str(smollm2_path), settings, name="split")  # named for the workers: waits for them
        with caplog.at_level("WARNING", logger="edge_infer.host"), host.acquire("gemma3") as lease:
            assert lease.engine.settings.rpc == (b.endpoint,)
            assert [r.message for r in caplog.records if a.endpoint in r.message] == [
                f"worker {a.endpoint} does not answer: Connection refused: loading gemma3 without it"]
    finally:
        host.close()
