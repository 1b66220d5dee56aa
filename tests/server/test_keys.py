"""Scoped keys (server.keys, serve --api-keys-file): each key may use the routes of its scopes
and name the models of its patterns (a remote model only where a pattern names it), on every
face; listings show what the key may name; the key's name, never the key, is in the request
log and /metrics; a bad keys file is one clear line."""

from __future__ import annotations

import logging
import re
import subprocess
import sys
import time

import anthropic
import httpx
import openai
import pytest

from edge_infer.config import EngineSettings
from tests.server.conftest import serve_logged
from tests.server.test_errors import error_of

SECRETS = {"editor": "sk-editor-0123456789", "ops": "sk-ops-0123456789", "watch": "sk-watch-0123456789",
           "gemma": "sk-gemma-0123456789", "star": "sk-star-0123456789"}
KEYS_TOML = f"""
[[keys]]
name = "editor"
key = "{SECRETS['editor']}"
models = ["smollm*"]

[[keys]]
name = "ops"
key = "{SECRETS['ops']}"
scopes = ["inference", "admin"]
models = ["*", "big"]

[[keys]]
name = "watch"          # dashboards: /metrics and /v1/stats only
key_env = "EI_TEST_WATCH_KEY"
scopes = ["admin"]

[[keys]]
name = "gemma"
key = "{SECRETS['gemma']}"
models = ["gemma*"]

[[keys]]
name = "star"
key = "{SECRETS['star']}"
models = ["*"]
"""
CHAT = {"model": "smollm2", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2, "temperature": 0}


def auth(name: str) -> dict:
    return {"Authorization": f"Bearer {SECRETS[name]}"}


@pytest.fixture(scope="module")
def keys_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("keys") / "keys.toml"
    path.write_text(KEYS_TOML)
    return path


@pytest.fixture(scope="module")
def live(smollm2_path, keys_file):
    """SmolLM2 as `smollm2` and two remote models on a stand-in, behind the keys above."""
    from edge_infer.engine import Engine
    from edge_infer.host import ModelHost
    from edge_infer.host.model_config import ModelsConfig
    from edge_infer.server.app import create_app
    from edge_infer.server.keys import Keyring
    from edge_infer.server.launch import BackgroundServer, bind_tcp
    from tests.remote.standin import StandIn

    mp = pytest.MonkeyPatch()
    mp.setenv("EI_TEST_WATCH_KEY", SECRETS["watch"])
    standin = StandIn()
    config = ModelsConfig.model_validate({"models": {"big": {"remote": [standin.url]},
                                                     "cheap": {"remote": [standin.url]}}})
    host = ModelHost(config=config, on_demand=False)
    engine = Engine(smollm2_path, EngineSettings(ctx=512, parallel=2, n_threads=2), name="smollm2")
    host.adopt(engine)
    sock = bind_tcp("127.0.0.1", 0)
    bg = BackgroundServer(create_app(host, keys=Keyring.load(keys_file)), [sock]).start()
    yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    bg.stop()
    host.close()
    standin.stop()
    mp.undo()


# ---- the keys file -----------------------------------------------------------------------
@pytest.mark.parametrize("text, message", [
    ("[[keys]]\nname = 'a'\nkey = 'k1'\nscopes = ['root']\n",
     "keys.0.scopes.0: Input should be 'inference' or 'admin'"),
    ("[[keys]]\nname = 'a'\n", "keys.0: Value error, give key or key_env"),
    ("[[keys]]\nname = 'a'\nkey = 'k1'\nkey_env = 'X'\n", "give key or key_env"),
    ("[[keys]]\nname = 'a'\nkey = 'k1'\nmodel = ['x']\n", "keys.0.model: Extra inputs are not permitted"),
    ("[[keys]]\nname = 'a b'\nkey = 'k1'\n", "keys.0.name: String should match pattern"),
    ("[[keys]]\nname = 'a'\nkey_env = 'EI_TEST_UNSET_VAR'\n",
     "keys.0 (a): the environment variable EI_TEST_UNSET_VAR is not set"),
    ("[[keys]]\nname = 'a'\nkey = 'k 1'\n", "keys.0 (a): a key may not be blank or contain spaces"),
    ("[[keys]]\nname = 'a'\nkey = 'k1'\n[[keys]]\nname = 'a'\nkey = 'k2'\n", "two keys are named 'a'"),
    ("[[keys]]\nname = 'a'\nkey = 'k1'\n[[keys]]\nname = 'b'\nkey = 'k1'\n", "two keys have the same secret"),
    ("keys = []\n", "keys: List should have at least 1 item"),
    ("[[keys]\n", "is not valid TOML"),
])
def test_a_bad_keys_file_is_one_clear_line(tmp_path, monkeypatch, text, message):
    from edge_infer.server.keys import Keyring, KeysFileError

    monkeypatch.delenv("EI_TEST_UNSET_VAR", raising=False)
    path = tmp_path / "keys.toml"
    path.write_text(text)
    with pytest.raises(KeysFileError) as caught:
        Keyring.load(path)
    assert message in str(caught.value) and "\n" not in str(caught.value)
    assert "'k1'" not in str(caught.value) and "'k2'" not in str(caught.value)  # a refusal never shows a key


def test_key_matching_and_the_default_key(tmp_path):
    from edge_infer.server.keys import Keyring

    ring = Keyring.load(api_key="k-default")
    key = ring.match("k-default")
    assert key.name == "default" and key.allows_scope("admin") and key.allows_model("big", remote=True)
    assert ring.match("k-defaul") is None and ring.match("") is None
    assert "k-default" not in repr(key)
    path = tmp_path / "k.toml"
    path.write_text("[[keys]]\nname = 'e'\nkey = 'k-e'\nmodels = ['Qwen*', '*']\n")
    both = Keyring.load(path, api_key="k-default")
    e = both.match("k-e")
    assert e.scopes == {"inference"} and e.allows_model("qwen-coder") and e.allows_model("gemma3")
    assert e.allows_model("qwen-remote", remote=True) and not e.allows_model("big", remote=True)
    with pytest.raises(Exception, match="named 'default'"):
        path.write_text("[[keys]]\nname = 'default'\nkey = 'k-e'\n")
        Keyring.load(path, api_key="k-default")


def test_a_keys_file_counts_as_a_key_for_exposure():
    from edge_infer.server.launch import BindError, check_exposure

    check_exposure("0.0.0.0", None, "keys.toml")
    with pytest.raises(BindError, match="--api-keys-file"):
        check_exposure("0.0.0.0", None, None)


# ---- routes and scopes -------------------------------------------------------------------
@pytest.mark.parametrize("name, method, path, body, status, code", [
    ("editor", "POST", "/v1/chat/completions", CHAT, 200, None),
    ("editor", "POST", "/v1/completions", {"prompt": "Hi", "max_tokens": 2}, 200, None),
    ("editor", "POST", "/tokenize", {"content": "Hi"}, 200, None),
    ("editor", "POST", "/v1/embeddings", {"input": "Hi"}, 200, None),
    ("editor", "GET", "/v1/models/smollm2", None, 200, None),
    ("editor", "GET", "/metrics", None, 403, "insufficient_scope"),
    ("editor", "GET", "/v1/stats", None, 403, "insufficient_scope"),
    ("editor", "GET", "/props", None, 403, "insufficient_scope"),
    ("editor", "GET", "/v1/responses/resp_x", None, 403, "insufficient_scope"),
    ("editor", "DELETE", "/v1/responses/resp_x", None, 403, "insufficient_scope"),
    ("ops", "GET", "/v1/responses/resp_x", None, 404, None),  # admin may look: there is none
    ("watch", "GET", "/metrics", None, 200, None),
    ("watch", "GET", "/v1/stats", None, 200, None),
    ("watch", "POST", "/v1/chat/completions", CHAT, 403, "insufficient_scope"),
    ("watch", "GET", "/v1/models", None, 403, "insufficient_scope"),
    ("gemma", "POST", "/v1/chat/completions", CHAT, 403, "model_not_allowed"),
    ("gemma", "POST", "/v1/chat/completions", {**CHAT, "model": None}, 403, "model_not_allowed"),  # the default
    ("gemma", "POST", "/tokenize", {"content": "Hi"}, 403, "model_not_allowed"),
    ("gemma", "GET", "/v1/models/smollm2", None, 403, "model_not_allowed"),
    ("editor", "POST", "/v1/chat/completions", {**CHAT, "model": "gemma3"}, 403, "model_not_allowed"),
    ("star", "POST", "/v1/chat/completions", {**CHAT, "model": "big"}, 403, "model_not_allowed"),
    ("ops", "POST", "/v1/chat/completions", {**CHAT, "model": "big"}, 200, None),
    ("ops", "POST", "/v1/chat/completions", {**CHAT, "model": "cheap"}, 403, "model_not_allowed"),
])
def test_each_key_reaches_its_routes_and_models(live, name, method, path, body, status, code):
    r = httpx.request(method, live + path, json=body, headers=auth(name), timeout=60)
    assert r.status_code == status, r.text
    if status == 403:
        err = error_of(r)
        assert err["code"] == code and err["type"] == "permission_error" and "\n" not in err["message"]
        assert SECRETS[name] not in r.text and repr(name) in err["message"]  # the name, never the key
        if code == "insufficient_scope":
            assert "'admin' scope" in err["message"] or "'inference' scope" in err["message"]


def test_missing_and_unknown_keys_are_401(live):
    assert error_of(httpx.get(live + "/v1/models"))["code"] == "missing_api_key"
    r = httpx.get(live + "/v1/models", headers={"Authorization": "Bearer sk-nobody"})
    assert r.status_code == 401 and error_of(r)["code"] == "invalid_api_key"
    assert httpx.get(live + "/health").status_code == 200


def test_refusals_in_each_faces_format(live):
    with anthropic.Anthropic(base_url=live, api_key=SECRETS["gemma"], max_retries=0) as c:
        with pytest.raises(anthropic.PermissionDeniedError) as caught:
            c.messages.create(model="smollm2", max_tokens=2, messages=[{"role": "user", "content": "Hi"}])
        assert caught.value.body["error"]["type"] == "permission_error"
        assert "'smollm2'" in caught.value.body["error"]["message"]
    with anthropic.Anthropic(base_url=live, api_key=SECRETS["editor"], max_retries=0) as c:
        out = c.messages.create(model="smollm2", max_tokens=2, messages=[{"role": "user", "content": "Hi"}])
        assert out.content
    r = httpx.post(live + "/api/chat", json={"model": "smollm2", "messages": CHAT["messages"], "stream": False},
                   headers=auth("gemma"))
    assert r.status_code == 403 and set(r.json()) == {"error"} and "may not use the model" in r.json()["error"]
    r = httpx.post(live + "/api/chat", json={"model": "big", "messages": CHAT["messages"], "stream": False},
                   headers=auth("star"))
    assert r.status_code == 403 and "remote model" in r.json()["error"]  # the remote path: Ollama's shape too
    r = httpx.post(live + "/api/generate", json={"model": "smollm2", "keep_alive": 0}, headers=auth("editor"))
    assert r.status_code == 403 and "'admin' scope" in r.json()["error"]  # unloading is admin's
    with openai.OpenAI(base_url=live + "/v1", api_key=SECRETS["star"], max_retries=0) as c:
        with pytest.raises(openai.PermissionDeniedError) as refused:
            c.chat.completions.create(model="big", messages=CHAT["messages"], max_tokens=2)
        assert refused.value.code == "model_not_allowed"
    with openai.OpenAI(base_url=live + "/v1", api_key=SECRETS["ops"], max_retries=0) as c:
        assert c.chat.completions.create(model="big", messages=CHAT["messages"]).choices[0].message.content


@pytest.mark.parametrize("name, listed", [("editor", {"smollm2"}), ("star", {"smollm2"}), ("gemma", set()),
                                          ("ops", {"smollm2", "big"})])
def test_listings_show_what_the_key_may_name(live, name, listed):
    assert {m["id"] for m in httpx.get(live + "/v1/models", headers=auth(name)).json()["data"]} == listed
    assert {m["name"] for m in httpx.get(live + "/api/tags", headers=auth(name)).json()["models"]} == listed
    assert {m["name"] for m in httpx.get(live + "/api/ps", headers=auth(name)).json()["models"]} == listed & {"smollm2"}


def test_the_keys_name_is_in_metrics_and_the_log_never_the_key(live, caplog):
    caplog.set_level(logging.INFO, logger="edge_infer.access")
    assert httpx.post(live + "/v1/chat/completions", json=CHAT, headers=auth("editor"), timeout=60).status_code == 200
    assert httpx.get(live + "/v1/stats", headers=auth("editor")).status_code == 403
    lines = [r.getMessage() for r in caplog.records if r.name == "edge_infer.access"]
    assert "POST /v1/chat/completions 200 key=editor" in lines and "GET /v1/stats 403 key=editor" in lines
    assert not any(s in line for line in lines for s in SECRETS.values())
    text = httpx.get(live + "/metrics", headers=auth("watch")).text
    series = [dict(re.findall(r'(\w+)="([^"]*)"', labels))
              for labels in re.findall(r'^edge_infer_http_requests_by_key_total\{(.*)\} \S+$', text, re.M)]
    assert {"key": "editor", "endpoint": "/v1/chat/completions", "status": "200"} in series
    assert {"key": "editor", "endpoint": "/v1/stats", "status": "403"} in series
    assert not any(s in text for s in SECRETS.values())


def test_serve_with_a_keys_file(smollm2_path, keys_file, tmp_path, monkeypatch):
    """`edge-infer serve` as a process: on 0.0.0.0 a keys file counts as a key; each request is
    logged with its key's name; a bad file stops it before the model loads, in one line."""
    bad = tmp_path / "bad.toml"
    bad.write_text("[[keys]]\nname = 'x'\nkey = 'k'\nscopes = ['everything']\n")
    p = subprocess.run([sys.executable, "-m", "edge_infer", "serve", smollm2_path, "--port", "0",
                        "--api-keys-file", bad], capture_output=True, text=True, timeout=60)
    assert p.returncode != 0 and "keys.0.scopes.0" in p.stderr and "Traceback" not in p.stderr
    monkeypatch.setenv("EI_TEST_WATCH_KEY", SECRETS["watch"])
    log = tmp_path / "serve.log"
    p = serve_logged(log, smollm2_path, "--host", "0.0.0.0", "--port", "0", "--api-keys-file", keys_file,
                     "--log-level", "info", "--threads", "2", "--parallel", "1", "--ctx", "512")
    try:
        port = re.search(r"http://0\.0\.0\.0:(\d+)/v1", log.read_text()).group(1)
        url = f"http://127.0.0.1:{port}/v1"
        assert "API key required" in log.read_text()
        name = smollm2_path.stem
        body = {**CHAT, "model": name}
        assert httpx.post(url + "/chat/completions", json=body, headers=auth("gemma"), timeout=60).status_code == 403
        assert httpx.post(url + "/chat/completions", json=body, headers=auth("star"), timeout=60).status_code == 200
        assert httpx.get(url + "/stats", headers=auth("star")).status_code == 403
        assert httpx.get(url + "/models").status_code == 401
        time.sleep(0.3)
        text = log.read_text()
        assert "POST /v1/chat/completions 200 key=star" in text and "GET /v1/stats 403 key=star" in text
        assert "GET /v1/models 401 key=-" in text
        assert not any(s in text for s in SECRETS.values())
    finally:
        p.terminate()
        p.communicate(timeout=30)
