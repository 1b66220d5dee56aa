"""/v1/embeddings and /v1/rerank on a real server over the real SmolLM2, through the
official `openai` client and as raw HTTP; a positive rerank on a tiny BERT cross-encoder."""

from __future__ import annotations

import base64

from pathlib import Path

import httpx
import numpy as np
import openai
import pytest

from tests.tiny_reranker import write_tiny_reranker

CAT, KITTEN, STOCKS = "The cat sat on the mat.", "A kitten rested on the rug.", "Stock markets fell sharply today."


def error_of(r: httpx.Response) -> dict:
    body = r.json()
    assert set(body) == {"error"} and set(body["error"]) == {"message", "type", "param", "code"}
    return body["error"]


def test_float_vectors_through_the_openai_client(client, served):
    r = client.embeddings.create(model="smollm2", input=[CAT, STOCKS], encoding_format="float")
    assert r.object == "list" and r.model == "smollm2"
    assert [d.index for d in r.data] == [0, 1] and all(d.object == "embedding" for d in r.data)
    assert all(len(d.embedding) == 576 for d in r.data)
    assert np.allclose(np.linalg.norm([d.embedding for d in r.data], axis=1), 1.0, atol=1e-5)
    n = len(served.engine.tokenize(CAT)) + len(served.engine.tokenize(STOCKS))
    assert r.usage.prompt_tokens == r.usage.total_tokens == n
    expected, _ = served.engine.embed([CAT, STOCKS])
    assert np.abs(np.asarray([d.embedding for d in r.data]) - np.asarray(expected)).max() < 1e-6


def test_base64_decodes_to_the_float_vectors(client):
    floats = client.embeddings.create(model="smollm2", input=CAT, encoding_format="float").data[0].embedding
    # Without encoding_format the client asks for base64 and decodes it itself.
    decoded = client.embeddings.create(model="smollm2", input=CAT).data[0].embedding
    raw = client.embeddings.create(model="smollm2", input=CAT, encoding_format="base64").data[0].embedding
    assert isinstance(raw, str)
    from_raw = np.frombuffer(base64.b64decode(raw), dtype="<f4")
    assert len(from_raw) == 576
    assert np.abs(np.asarray(decoded) - np.asarray(floats)).max() < 1e-6
    assert np.abs(from_raw - np.asarray(floats)).max() < 1e-6


def test_dimensions_truncate_and_renormalize(client):
    full = np.asarray(client.embeddings.create(model="smollm2", input=CAT, encoding_format="float").data[0].embedding)
    short = client.embeddings.create(model="smollm2", input=CAT, encoding_format="float", dimensions=64).data[0].embedding
    assert len(short) == 64 and abs(np.linalg.norm(short) - 1.0) < 1e-5
    assert np.abs(np.asarray(short) - full[:64] / np.linalg.norm(full[:64])).max() < 1e-6
    with pytest.raises(openai.BadRequestError) as e:
        client.embeddings.create(model="smollm2", input=CAT, dimensions=577)
    assert e.value.param == "dimensions" and "576" in e.value.message


def test_token_inputs_and_related_sentences(client, served):
    tokens = served.engine.tokenize(CAT)
    by_text = client.embeddings.create(model="smollm2", input=[CAT, KITTEN, STOCKS], encoding_format="float")
    by_ids = client.embeddings.create(model="smollm2", input=[tokens], encoding_format="float")
    single_ids = client.embeddings.create(model="smollm2", input=tokens, encoding_format="float")
    cat, kitten, stocks = (np.asarray(d.embedding) for d in by_text.data)
    assert np.abs(np.asarray(by_ids.data[0].embedding) - cat).max() < 1e-6
    assert np.abs(np.asarray(single_ids.data[0].embedding) - cat).max() < 1e-6
    assert by_ids.usage.prompt_tokens == single_ids.usage.prompt_tokens == len(tokens)
    assert cat @ kitten > cat @ stocks  # unit vectors: the dot product is the cosine


def test_raw_http_shape_exactly_as_openai(served):
    r = httpx.post(served.base + "/embeddings", json={"model": "smollm2", "input": "Hello", "user": "someone"},
                   timeout=60)
    assert r.status_code == 200 and r.headers["content-type"].startswith("application/json")
    body = r.json()
    assert list(body) == ["object", "data", "model", "usage"]
    assert body["object"] == "list" and body["model"] == "smollm2"
    assert body["usage"] == {"prompt_tokens": 1, "total_tokens": 1}  # "Hello" is one SmolLM2 token
    (item,) = body["data"]
    assert set(item) == {"object", "index", "embedding"} and item["object"] == "embedding" and item["index"] == 0
    assert len(item["embedding"]) == 576 and all(isinstance(x, float) for x in item["embedding"])
    # The bare path answers too (clients given http://host:port as their base).
    assert httpx.post(served.url + "/embeddings", json={"input": "Hello"}, timeout=60).json()["data"][0]["embedding"] \
        == item["embedding"]


@pytest.mark.parametrize("body, param, words", [
    ({"input": []}, "input", "must not be empty"),
    ({"input": [""]}, "input", r"input[0] is empty"),
    ({"input": ["ok", [1, 2]]}, "input[1]", None),
    ({"input": [[5, 10**9]]}, "input", "outside the vocabulary"),
    ({"input": 7}, "input", None),
    ({}, "input", None),
    ({"input": ["x"] * 2049}, "input", "at most 2048"),
    ({"input": "hi", "encoding_format": "hex"}, "encoding_format", None),
    ({"input": "hi", "dimensions": 0}, "dimensions", None),
    ({"input": "x " * 600}, "input", "at most 512"),
])
def test_bad_embedding_requests_name_their_param(served, body, param, words):
    r = httpx.post(served.base + "/embeddings", json=body, timeout=60)
    assert r.status_code == 400
    err = error_of(r)
    assert err["param"] == param and err["type"] == "invalid_request_error"
    if words:
        assert words in err["message"]


def test_over_long_input_is_context_length_exceeded_and_the_server_goes_on(client):
    with pytest.raises(openai.BadRequestError) as e:
        client.embeddings.create(model="smollm2", input=["fine", "word " * 600])
    assert e.value.code == "context_length_exceeded" and "input[1]" in e.value.message
    chat = client.chat.completions.create(model="smollm2", messages=[{"role": "user", "content": "Hi"}],
                                          max_tokens=4, temperature=0)
    assert chat.choices[0].message.content
    assert len(client.embeddings.create(model="smollm2", input="still here").data) == 1


def test_unknown_model_is_404(client, served):
    with pytest.raises(openai.NotFoundError) as e:
        client.embeddings.create(model="text-embedding-3-small", input=CAT)
    assert e.value.code == "model_not_found" and "text-embedding-3-small" in e.value.message
    r = httpx.post(served.base + "/rerank", json={"model": "bge-reranker", "query": "q", "documents": ["d"]})
    assert r.status_code == 404 and error_of(r)["code"] == "model_not_found"


@pytest.mark.parametrize("path", ["/v1/rerank", "/v1/reranking", "/rerank"])
def test_rerank_on_a_model_without_a_ranking_head_is_refused(served, path):
    r = httpx.post(served.url + path, json={"model": "smollm2", "query": "What is a cat?",
                                            "documents": ["A cat is an animal.", "Stocks fell."]}, timeout=60)
    assert r.status_code == 400
    err = error_of(r)
    assert err["code"] == "model_cannot_rerank" and err["param"] == "model" and "ranking head" in err["message"]


@pytest.mark.parametrize("body, param", [
    ({"query": "q", "documents": []}, "documents"),
    ({"query": "", "documents": ["d"]}, "query"),
    ({"documents": ["d"]}, "query"),
    ({"query": "q", "documents": ["d"], "top_n": 0}, "top_n"),
])
def test_bad_rerank_requests_name_their_param(served, body, param):
    r = httpx.post(served.base + "/rerank", json=body, timeout=60)
    assert r.status_code == 400 and error_of(r)["param"] == param


def test_embedding_requests_are_counted_in_metrics(served):
    httpx.post(served.base + "/embeddings", json={"input": "count me"}, timeout=60)
    text = httpx.get(served.url + "/metrics").text
    assert 'edge_infer_http_requests_total{endpoint="/v1/embeddings",status="200"}' in text


@pytest.fixture(scope="module")
def reranking(tmp_path_factory):
    from edge_infer.config import EngineSettings
    from edge_infer.engine import Engine
    from tests.server.conftest import start_server

    path = write_tiny_reranker(tmp_path_factory.mktemp("rerank") / "tiny-rerank.gguf")
    engine = Engine(path, EngineSettings(ctx=64, n_batch=64, parallel=1, n_threads=2), name="tiny-rerank")
    bg, live = start_server(engine)
    yield live
    bg.stop()
    engine.close()
    Path(live.socket).parent.rmdir()


DOCS = ["the cat sat on the mat .", "stocks fell .", "a dog is an animal .", "what is a cat ?"]


def test_rerank_results_sorted_by_score(reranking):
    r = httpx.post(reranking.base + "/rerank", json={"model": "tiny-rerank", "query": "what is a cat ?",
                                                     "documents": DOCS}, timeout=60)
    assert r.status_code == 200
    body = r.json()
    assert set(body) == {"object", "model", "results", "usage"} and body["model"] == "tiny-rerank"
    results = body["results"]
    assert sorted(x["index"] for x in results) == [0, 1, 2, 3]
    assert all(set(x) == {"index", "relevance_score"} for x in results)
    got = [x["relevance_score"] for x in results]
    assert got == sorted(got, reverse=True)
    scores, n_tokens = reranking.engine.rerank("what is a cat ?", DOCS)
    assert all(abs(x["relevance_score"] - scores[x["index"]]) < 1e-6 for x in results)
    assert body["usage"] == {"prompt_tokens": n_tokens, "total_tokens": n_tokens}


def test_rerank_top_n_and_documents_over_the_other_paths(reranking):
    for path in ("/v1/reranking", "/rerank"):
        r = httpx.post(reranking.url + path, json={"query": "what is a cat ?", "documents": DOCS, "top_n": 2,
                                                   "return_documents": True}, timeout=60)
        results = r.json()["results"]
        assert r.status_code == 200 and len(results) == 2
        assert all(x["document"] == {"text": DOCS[x["index"]]} for x in results)


def test_embeddings_from_a_reranker_are_refused(reranking):
    r = httpx.post(reranking.base + "/embeddings", json={"input": "the cat"}, timeout=60)
    assert r.status_code == 400 and "reranker" in error_of(r)["message"]


def test_a_reranker_refuses_to_generate_and_keeps_serving(reranking):
    for route, body in (("/chat/completions", {"messages": [{"role": "user", "content": "hi"}]}),
                        ("/completions", {"prompt": "hi"})):
        r = httpx.post(reranking.base + route, json={"model": "tiny-rerank", "max_tokens": 2, **body})
        assert r.status_code == 400 and "cannot generate text" in error_of(r)["message"]
    ok = httpx.post(reranking.base + "/rerank", json={"model": "tiny-rerank", "query": "cat", "documents": DOCS})
    assert ok.status_code == 200
