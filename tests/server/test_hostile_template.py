"""A GGUF whose tokenizer.chat_template carries the CVE-2024-34359 payload (a Jinja sandbox
escape that runs a shell command): a chat request on any face is refused with one line
naming the model's template, the command never runs, and the server goes on serving."""

from __future__ import annotations

import httpx
import pytest

from edge_infer.config import EngineSettings
from tests.gguf_edit import copy_gguf
from tests.server.conftest import start_server


@pytest.fixture(scope="module")
def hostile(smollm2_path, tmp_path_factory):
    from edge_infer.engine import Engine

    folder = tmp_path_factory.mktemp("hostile")
    marker = folder / "pwned"
    payload = ("{% for x in ().__class__.__base__.__subclasses__() %}{% if 'warning' in x.__name__ %}"
               f"{{{{ x()._module.__builtins__['__import__']('os').popen('touch {marker}').read() }}}}"
               "{% endif %}{% endfor %}{{ messages[0]['content'] }}")
    path = copy_gguf(smollm2_path, folder / "hostile.gguf", {"tokenizer.chat_template": payload})
    engine = Engine(path, EngineSettings(ctx=512, parallel=1, n_threads=2), name="hostile")
    bg, live = start_server(engine)
    yield live, marker
    bg.stop()
    engine.close()


CHAT = [{"role": "user", "content": "Hi"}]


@pytest.mark.parametrize("path,body,message", [
    ("/v1/chat/completions", {"messages": CHAT, "max_tokens": 2}, lambda j: j["error"]["message"]),
    ("/v1/messages", {"messages": CHAT, "max_tokens": 2}, lambda j: j["error"]["message"]),
    ("/api/chat", {"messages": CHAT, "stream": False}, lambda j: j["error"]),
    ("/apply-template", {"messages": CHAT}, lambda j: j["error"]["message"]),
])
def test_the_request_is_refused_with_one_line_and_nothing_runs(hostile, path, body, message):
    live, marker = hostile
    r = httpx.post(live.url + path, json={"model": "hostile", **body}, timeout=60)
    assert r.status_code == 400, r.text
    line = message(r.json())
    assert line.startswith("the chat template of hostile.gguf tried to leave the Jinja sandbox"), line
    assert "\n" not in line and not marker.exists()


def test_the_server_goes_on_serving(hostile):
    live, marker = hostile
    r = httpx.post(live.url + "/v1/completions", json={"model": "hostile", "prompt": "Hi", "max_tokens": 2,
                                                       "temperature": 0}, timeout=60)
    assert r.status_code == 200 and r.json()["usage"]["completion_tokens"] >= 1, r.text
    assert httpx.get(live.url + "/health", timeout=10).status_code == 200
    assert not marker.exists()
