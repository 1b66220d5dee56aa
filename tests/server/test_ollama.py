"""Ollama's native API (/api/*) against the real server and SmolLM2, through Ollama's own
Python client (`ollama` from PyPI): the wire format is right when it parses it."""

from __future__ import annotations

import json
import time
from datetime import datetime, timedelta, timezone

import httpx
import jsonschema
import pytest

from tests.server.conftest import REPEATABLE_GREEDY

import ollama

QUESTION = [{"role": "user", "content": "What is the capital of France?"}]
GREEDY = {"temperature": 0, "seed": 7, "num_predict": 16}
# Ollama's defaults where greedy decoding still feels them, for the OpenAI route's request
OLLAMA_DEFAULTS = {"top_k": 40, "min_p": 0.0, "repeat_penalty": 1.1}


@pytest.fixture(scope="module")
def live(make_served):
    return make_served(**REPEATABLE_GREEDY)


@pytest.fixture
def client(live):
    with ollama.Client(host=live.url) as c:
        yield c


@pytest.fixture
def oai(live):
    from openai import OpenAI

    with OpenAI(base_url=live.base, api_key="unused", max_retries=0) as c:
        yield c


def test_version_tags_and_ps(client, live):
    assert httpx.get(live.url + "/api/version").json()["version"].count(".") == 2
    models = client.list().models
    assert [m.model for m in models] == ["smollm2"]
    d = models[0].details
    assert (d.format, d.family, d.quantization_level) == ("gguf", "llama", "Q4_1")
    assert d.parameter_size.endswith("M") and models[0].size > 50 << 20
    assert len(models[0].digest) == 64
    running = client.ps().models
    assert [m.model for m in running] == ["smollm2"]
    assert running[0].context_length == live.engine.n_ctx_seq
    assert running[0].size > 0 and running[0].size_vram == 0
    assert running[0].expires_at is not None


def test_show_reads_the_gguf_header(client, live):
    s = client.show("smollm2")
    assert s.details.family == "llama" and s.details.quantization_level == "Q4_1"
    assert s.modelinfo["general.architecture"] == "llama"
    assert s.modelinfo["llama.context_length"] == live.engine.info.context_length
    assert s.modelinfo["general.parameter_count"] == live.engine.info.parameter_count
    assert s.template == live.engine.info.chat_template and "completion" in s.capabilities
    assert client.show("smollm2:latest").modelinfo == s.modelinfo  # Ollama's default tag


def test_generate_whole_and_streamed(client, live):
    whole = client.generate(model="smollm2", prompt="What is the capital of France?", options=GREEDY)
    assert whole.done and whole.done_reason in ("stop", "length") and whole.response
    assert whole.model == "smollm2"
    assert whole.prompt_eval_count == len(live.engine.tokenize_messages(QUESTION))
    assert 0 < whole.eval_count <= 16
    assert whole.total_duration >= whole.eval_duration > 0 and whole.prompt_eval_duration > 0
    datetime.fromisoformat(whole.created_at.replace("Z", "+00:00"))
    parts = list(client.generate(model="smollm2", prompt="What is the capital of France?", options=GREEDY,
                                 stream=True))
    *pieces, last = parts
    assert pieces and not any(p.done for p in pieces) and last.done
    assert last.done_reason == whole.done_reason and last.eval_count == whole.eval_count
    assert "".join(p.response for p in parts) == whole.response


def test_chat_matches_the_openai_route(client, oai):
    r = client.chat(model="smollm2", messages=QUESTION, options=GREEDY)
    assert r.message.role == "assistant" and r.message.content and r.done
    o = oai.chat.completions.create(model="smollm2", messages=QUESTION, temperature=0, seed=7, max_tokens=16,
                                    top_p=0.9, extra_body=OLLAMA_DEFAULTS)
    assert r.message.content == o.choices[0].message.content
    assert r.eval_count == o.usage.completion_tokens and r.prompt_eval_count == o.usage.prompt_tokens
    assert r.done_reason == o.choices[0].finish_reason
    parts = list(client.chat(model="smollm2", messages=QUESTION, options=GREEDY, stream=True))
    assert all(p.message.role == "assistant" for p in parts) and parts[-1].done
    assert "".join(p.message.content for p in parts) == r.message.content


def test_generate_templates_the_prompt_with_system_or_sends_it_raw(client, oai):
    system = "You answer in one word."
    g = client.generate(model="smollm2", prompt="Name a colour.", system=system, options=GREEDY)
    c = client.chat(model="smollm2", messages=[{"role": "system", "content": system},
                                               {"role": "user", "content": "Name a colour."}], options=GREEDY)
    assert g.response == c.message.content
    raw = client.generate(model="smollm2", prompt="The capital of France is", raw=True,
                          options={"temperature": 0, "num_predict": 4})
    o = oai.completions.create(model="smollm2", prompt="The capital of France is", temperature=0, max_tokens=4,
                               top_p=0.9, extra_body=OLLAMA_DEFAULTS)
    assert raw.response == o.choices[0].text and raw.eval_count == 4 and raw.done_reason == "length"


def test_format_json_and_schema(client):
    r = client.generate(model="smollm2", prompt="Describe a cat as JSON.", format="json",
                        options={"temperature": 0, "num_predict": 48})
    if r.done_reason == "stop":  # cut short by num_predict it cannot be whole JSON
        assert isinstance(json.loads(r.response), dict)
    else:
        assert r.response.lstrip().startswith("{")
    person = {"type": "object", "required": ["name", "age"], "additionalProperties": False,
              "properties": {"name": {"type": "string", "maxLength": 12}, "age": {"type": "integer"}}}
    r = client.chat(model="smollm2", messages=[{"role": "user", "content": "Invent a person."}], format=person,
                    options={"temperature": 0, "num_predict": 64})
    assert r.done_reason == "stop"
    jsonschema.validate(json.loads(r.message.content), person)


def test_num_ctx_caps_the_request_within_the_loaded_context(client, live):
    prompt = len(live.engine.tokenize_messages(QUESTION))
    r = client.chat(model="smollm2", messages=QUESTION, options={"num_ctx": prompt + 3, "temperature": 0,
                                                                 "num_predict": 50})
    assert r.eval_count <= 3 and r.done_reason == "length"
    with pytest.raises(ollama.ResponseError) as e:
        client.chat(model="smollm2", messages=QUESTION, options={"num_ctx": prompt})
    assert e.value.status_code == 400 and "num_ctx" in e.value.error
    big = client.chat(model="smollm2", messages=QUESTION, options={"num_ctx": 1 << 20, "num_predict": 2})
    assert big.eval_count == 2  # above the loaded context: the loaded context is the cap


def _expires_in(client) -> timedelta:
    (m,) = client.ps().models
    return m.expires_at - datetime.now(timezone.utc)


def test_keep_alive_strings_and_numbers(client):
    client.generate(model="smollm2", prompt="Hi", keep_alive="10m", options={"num_predict": 1})
    assert timedelta(minutes=9) < _expires_in(client) <= timedelta(minutes=10)
    client.chat(model="smollm2", messages=QUESTION, keep_alive=90, options={"num_predict": 1})
    assert timedelta(seconds=60) < _expires_in(client) <= timedelta(seconds=90)
    r = client.generate(model="smollm2", keep_alive="1h30m")  # no prompt: only (re)load
    assert r.done and r.done_reason == "load" and r.response == ""
    assert timedelta(minutes=89) < _expires_in(client) <= timedelta(minutes=90)
    client.chat(model="smollm2", messages=[], keep_alive=-1)
    assert _expires_in(client) > timedelta(days=365 * 100)  # kept until memory is needed
    with pytest.raises(ollama.ResponseError) as e:
        client.generate(model="smollm2", prompt="Hi", keep_alive="soon")
    assert e.value.status_code == 400 and "keep_alive" in e.value.error


def test_unknown_model_is_404_in_ollamas_shape(client, live):
    for call in (lambda: client.generate(model="nope", prompt="Hi"),
                 lambda: client.chat(model="nope", messages=QUESTION),
                 lambda: client.chat(model="nope", messages=QUESTION, stream=True).__next__(),
                 lambda: client.show("nope"), lambda: client.embed(model="nope", input="Hi")):
        with pytest.raises(ollama.ResponseError) as e:
            call()
        assert e.value.status_code == 404 and "'nope' does not exist" in e.value.error
    r = httpx.post(live.url + "/api/generate", json={"model": "nope", "prompt": "Hi"})
    assert r.status_code == 404 and set(r.json()) == {"error"}


@pytest.mark.parametrize("options, field", [
    ({"temperature": "hot"}, "options.temperature"), ({"top_p": 3}, "options.top_p"),
    ({"num_predict": "many"}, "options.num_predict"), ({"stop": ["a"] * 9}, "options.stop"),
    ({"num_ctx": 0}, "options.num_ctx"), ({"seed": 1.5}, "options.seed")])
def test_bad_options_are_400_naming_the_field(client, options, field):
    with pytest.raises(ollama.ResponseError) as e:
        client.generate(model="smollm2", prompt="Hi", options=options)
    assert e.value.status_code == 400 and field in e.value.error


@pytest.mark.parametrize("body, field", [
    ({"model": "smollm2", "prompt": "Hi", "template": "{{ .Prompt }}"}, "template"),
    ({"model": "smollm2", "prompt": "Hi", "images": ["aGk="]}, "images"),
    ({"model": "smollm2", "prompt": "Hi", "suffix": "end"}, "suffix"),
    ({"model": "smollm2", "prompt": "Hi", "format": "yaml"}, "format"),
    ({"prompt": "Hi"}, "model")])
def test_unsupported_or_bad_fields_are_400(live, body, field):
    r = httpx.post(live.url + "/api/generate", json=body)
    assert r.status_code == 400 and field in r.json()["error"]
    r = httpx.post(live.url + "/api/chat", content=b'{"model": "smollm2", "messages": [')
    assert r.status_code == 400 and "not valid JSON" in r.json()["error"]
    r = httpx.post(live.url + "/api/chat", json={"model": "smollm2", "messages": QUESTION, "tools": [{}]})
    assert r.status_code == 400 and "tools" in r.json()["error"]


def test_a_client_that_stops_reading_leaves_the_server_serving(client, live):
    engine = live.engine
    stream = client.generate(model="smollm2", prompt="Write a long story about a dragon.", stream=True,
                             options={"num_predict": 400, "temperature": 0})
    for _, part in zip(range(3), stream):
        assert not part.done
    stream.close()  # closes the HTTP response mid-stream
    deadline = time.monotonic() + 60
    while engine.live_sequences() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not engine.live_sequences()
    assert engine.recent[-1].reason == "cancelled" and engine.recent[-1].generated_tokens < 400
    r = client.chat(model="smollm2", messages=QUESTION, options={"num_predict": 4})
    assert r.done and r.eval_count > 0
    metrics = httpx.get(live.url + "/metrics").text
    assert 'endpoint="/api/generate",status="200"' in metrics


def test_embed(client, live):
    r = client.embed(model="smollm2", input=["The cat sat.", "A cat was sitting.", "Stock prices fell."])
    vectors = r.embeddings
    assert len(vectors) == 3 and len(vectors[0]) == live.engine.embedding_size
    assert all(abs(sum(x * x for x in v) - 1) < 1e-3 for v in vectors)  # normalized, as Ollama's
    cos = [sum(a * b for a, b in zip(vectors[0], v)) for v in vectors[1:]]
    assert cos[0] > cos[1]  # the same meaning is nearer than another topic
    assert r.prompt_eval_count > 0 and r.model == "smollm2"
    one = client.embed(model="smollm2", input="The cat sat.", dimensions=16)
    assert len(one.embeddings[0]) == 16 and abs(sum(x * x for x in one.embeddings[0]) - 1) < 1e-3
    legacy = client.embeddings(model="smollm2", prompt="The cat sat.")
    norm = sum(x * x for x in legacy.embedding) ** 0.5
    assert norm > 0 and abs(norm - 1) > 1e-3  # the legacy route is not normalized, as Ollama's
    assert max(abs(x / norm - y) for x, y in zip(legacy.embedding, vectors[0])) < 1e-3
    long = client.embed(model="smollm2", input="word " * 5000)  # truncated, as Ollama's default
    assert len(long.embeddings) == 1
    with pytest.raises(ollama.ResponseError) as e:
        client.embed(model="smollm2", input="word " * 5000, truncate=False)
    assert e.value.status_code == 400


def test_load_and_unload_without_a_prompt(make_served):
    other = make_served()  # its own engine: this test unloads it
    try:
        with ollama.Client(host=other.url) as c:
            r = c.generate(model="smollm2", keep_alive=0)
            assert r.done and r.done_reason == "unload" and r.response == ""
            assert c.ps().models == []
            r = c.chat(model="smollm2", messages=[])
            assert r.done and r.done_reason == "load" and r.message.content == ""
            assert [m.model for m in c.ps().models] == ["smollm2"]
            r = c.chat(model="smollm2", messages=QUESTION, options={"num_predict": 3})
            assert r.eval_count > 0
            assert c.chat(model="smollm2", messages=[], keep_alive="0s").done_reason == "unload"
            assert c.ps().models == []
            with pytest.raises(ollama.ResponseError) as e:
                c.generate(model="nope", keep_alive=0)
            assert e.value.status_code == 404
    finally:
        other.app.state.server.host.close()  # the engine it loaded again


def test_an_api_key_guards_the_ollama_routes_too(make_served):
    guarded = make_served({"api_key": "sekrit"})
    with ollama.Client(host=guarded.url) as c:
        with pytest.raises(ollama.ResponseError) as e:
            c.list()
        assert e.value.status_code == 401 and "API key" in e.value.error
    with ollama.Client(host=guarded.url, headers={"Authorization": "Bearer sekrit"}) as c:
        assert [m.model for m in c.list().models] == ["smollm2"]
        assert c.generate(model="smollm2", prompt="Hi", options={"num_predict": 2}).eval_count > 0


def test_the_root_answers_as_ollama_does_for_liveness_probes(live):
    import httpx

    r = httpx.get(live.url + "/")
    assert r.status_code == 200 and r.text == "Ollama is running"
    assert httpx.head(live.url + "/").status_code == 200
