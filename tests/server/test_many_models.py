"""Many models behind one server, on the real SmolLM2 and Gemma 3: installed models load
on their first request (once, however many ask at once), /v1/models says which are
loaded, a switch under a budget that holds one model unloads the idle one and never a
live stream, keep_alive unloads, and a model damaged while unloaded fails alone."""

from __future__ import annotations

import shutil
import threading
import time

import httpx
import pytest

from edge_infer.config import EngineSettings
from edge_infer.host import Budget, ModelHost
from edge_infer.host.residency import plan_footprint
from edge_infer.host.sources import Source, names_of
from tests.server.conftest import short_socket_path
from tests.server.test_errors import error_of

SETTINGS = EngineSettings(ctx=512, parallel=2, n_threads=2, prompt_cache_mib=16)


@pytest.fixture
def serve_models(smollm2_path, gemma3_path):
    """serve_models(budget=None, files=None) -> (base url, host, opened engine names)."""
    from edge_infer.host.seams import open_engine as _open_engine
    from edge_infer.server.app import create_app
    from edge_infer.server.launch import BackgroundServer, bind_tcp, bind_unix

    running = []

    def serve(budget: Budget | None = None, files: dict | None = None):
        files = files or {"smollm2": smollm2_path, "gemma3": gemma3_path}
        sources = {name: Source(path, name, names_of(path), path.stat().st_size) for name, path in files.items()}
        opened = []

        def open_engine(path, settings, name):
            opened.append(name)
            return _open_engine(path, settings, name)

        host = ModelHost(find_source=sources.get, list_sources=lambda: list(sources.values()),
                         open_engine=open_engine, settings=SETTINGS, budget=budget)
        tcp = bind_tcp("127.0.0.1", 0)
        bg = BackgroundServer(create_app(host), [tcp, bind_unix(short_socket_path())]).start()
        running.append((bg, host))
        return f"http://127.0.0.1:{tcp.getsockname()[1]}", host, opened

    yield serve
    for bg, host in running:
        bg.stop()
        host.close()


def chat(url, model, **extra):
    return httpx.post(url + "/v1/chat/completions", timeout=120, json={
        "model": model, "messages": [{"role": "user", "content": "Say hi."}], "max_tokens": 4,
        "temperature": 0, **extra})


def states(url) -> dict:
    return {m["id"]: m["status"]["value"] for m in httpx.get(url + "/v1/models").json()["data"]}


def test_installed_models_load_on_their_first_request_and_are_listed(serve_models):
    from openai import OpenAI

    url, host, opened = serve_models()
    assert states(url) == {"smollm2": "unloaded", "gemma3": "unloaded"}
    assert httpx.get(url + "/health").json() == {"status": "ok", "model": None, "loaded": []}
    answer = chat(url, "gemma3")
    assert answer.status_code == 200 and answer.json()["model"] == "gemma3"
    assert states(url) == {"gemma3": "loaded", "smollm2": "unloaded"}
    card = httpx.get(url + "/v1/models/gemma3").json()
    assert card["memory"]["ram_bytes"] > 200 << 20 and card["status"]["active_requests"] == 0
    assert chat(url, "smollm2").json()["model"] == "smollm2" and opened == ["gemma3", "smollm2"]
    with OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0) as client:
        assert {m.id for m in client.models.list()} == {"smollm2", "gemma3"}
    unknown = chat(url, "llama-3-70b")
    assert unknown.status_code == 404 and error_of(unknown)["code"] == "model_not_found"
    assert "'smollm2', 'gemma3'" in error_of(unknown)["message"] or "'gemma3', 'smollm2'" in error_of(unknown)["message"]
    path_like = chat(url, "/etc/passwd")                           # a client never names a file
    assert path_like.status_code == 404 and opened == ["gemma3", "smollm2"]


def test_concurrent_first_requests_load_the_model_once(serve_models):
    url, host, opened = serve_models()
    answers = []
    threads = [threading.Thread(target=lambda: answers.append(chat(url, "smollm2"))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert [a.status_code for a in answers] == [200] * 4 and opened == ["smollm2"]


def test_a_switch_under_a_budget_for_one_model_never_cuts_a_live_stream(serve_models, smollm2_path, gemma3_path):
    sizes = [plan_footprint(p, SETTINGS).ram for p in (smollm2_path, gemma3_path)]
    url, host, opened = serve_models(budget=Budget(ram=max(sizes) + (8 << 20)))
    streamed, events = [], []

    def stream_smollm2():
        with httpx.stream("POST", url + "/v1/chat/completions", timeout=120, json={
                "model": "smollm2", "messages": [{"role": "user", "content": "Count to fifty."}],
                "max_tokens": 48, "temperature": 0, "stream": True, "stream_options": {"include_usage": True}}) as r:
            for line in filter(None, r.iter_lines()):
                streamed.append(line)
                if len(streamed) == 4:
                    events.append("streaming")

    streamer = threading.Thread(target=stream_smollm2)
    streamer.start()
    for _ in range(600):
        if events:
            break
        time.sleep(0.01)
    answer = chat(url, "gemma3")                                   # waits for smollm2's stream to end
    streamer.join(120)
    assert answer.status_code == 200 and answer.json()["model"] == "gemma3"
    assert streamed[-1] == "data: [DONE]" and '"completion_tokens":48' in streamed[-2]
    assert states(url) == {"gemma3": "loaded", "smollm2": "unloaded"} and host.evictions == 1
    assert host.used().ram <= host.budget.ram
    assert chat(url, "smollm2").status_code == 200                 # and back
    assert states(url) == {"smollm2": "loaded", "gemma3": "unloaded"} and opened == ["smollm2", "gemma3", "smollm2"]


def test_keep_alive_zero_unloads_after_the_request_and_a_bad_one_is_refused(serve_models):
    url, host, opened = serve_models()
    assert chat(url, "smollm2", keep_alive=0).status_code == 200
    for _ in range(200):
        if states(url)["smollm2"] == "unloaded":
            break
        time.sleep(0.02)
    assert states(url)["smollm2"] == "unloaded"
    bad = chat(url, "smollm2", keep_alive="soon")
    assert bad.status_code == 400 and error_of(bad)["param"] == "keep_alive"
    assert chat(url, "smollm2", keep_alive="10m").status_code == 200
    assert httpx.get(url + "/v1/models/smollm2").json()["status"]["expires_in"] > 590


def test_a_model_damaged_while_unloaded_fails_alone(serve_models, smollm2_path, gemma3_path, tmp_path):
    copy = tmp_path / "smol-copy.gguf"
    shutil.copyfile(smollm2_path, copy)
    url, host, opened = serve_models(files={"copy": copy, "gemma3": gemma3_path})
    assert chat(url, "copy", keep_alive=0).status_code == 200
    for _ in range(200):
        if states(url)["copy"] == "unloaded":
            break
        time.sleep(0.02)
    with open(copy, "r+b") as f:
        f.truncate(copy.stat().st_size // 2)
    broken = chat(url, "copy")
    assert broken.status_code == 500 and error_of(broken)["code"] == "model_load_failed"
    assert "smol-copy.gguf" in error_of(broken)["message"]
    assert chat(url, "gemma3").status_code == 200                  # the others keep serving
    assert httpx.get(url + "/health").json()["status"] == "ok"
