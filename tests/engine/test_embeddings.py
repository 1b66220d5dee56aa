"""Engine.embed / Engine.rerank on the real SmolLM2: a second llama.cpp context (mean
pooling, as SmolLM2's GGUF names none) beside the generating one; rerank on a tiny BERT
cross-encoder with rank pooling (tests/tiny_reranker.py)."""

import threading

import numpy as np
import pytest

from edge_infer.engine import BadRequestError, Request, SamplingParams, TokenEvent
from edge_infer.errors import ContextOverflowError
from tests.tiny_reranker import write_tiny_reranker

CAT, KITTEN, STOCKS = "The cat sat on the mat.", "A kitten rested on the rug.", "Stock markets fell sharply today."
GREEDY = SamplingParams(temperature=0.0, max_tokens=8)


@pytest.fixture(scope="module")
def engine(make_engine):
    return make_engine(parallel=2)


def cos(a, b) -> float:
    a, b = np.asarray(a), np.asarray(b)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def test_vectors_are_unit_length_model_wide_and_deterministic(engine):
    vectors, n_tokens = engine.embed([CAT, STOCKS])
    assert len(vectors) == 2 and n_tokens == len(engine.tokenize(CAT)) + len(engine.tokenize(STOCKS))
    n_embd = engine.info.embedding_length  # from the GGUF header
    assert engine.embedding_size == n_embd == 576  # SmolLM2-135M's width
    assert all(len(v) == n_embd for v in vectors)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    again, _ = engine.embed([CAT, STOCKS])
    assert np.array_equal(vectors, again)
    raw, _ = engine.embed([CAT], normalize=False)
    assert np.linalg.norm(raw[0]) > 1.5  # pooled hidden states are not unit length by themselves
    assert np.allclose(np.asarray(raw[0]) / np.linalg.norm(raw[0]), vectors[0], atol=1e-5)


def test_a_batch_equals_each_input_alone(engine):
    texts = [CAT, KITTEN, STOCKS, "Hi", "Photosynthesis turns light into chemical energy in plants."]
    together, n = engine.embed(texts)
    alone = [engine.embed([t])[0][0] for t in texts]
    assert np.abs(np.asarray(together) - np.asarray(alone)).max() < 1e-4
    assert n == sum(len(engine.tokenize(t)) for t in texts)


def test_many_inputs_span_several_decodes(engine):
    # 70 inputs of ~12 tokens: more than one decode holds (64 sequences, 512 tokens); order kept.
    texts = [f"Sentence number {i} is about topic {i % 7}." for i in range(70)]
    vectors, _ = engine.embed(texts)
    assert len(vectors) == 70
    for i in (0, 41, 69):
        assert np.abs(np.asarray(vectors[i]) - np.asarray(engine.embed([texts[i]])[0][0])).max() < 1e-4


def test_token_ids_embed_like_their_text(engine):
    tokens = engine.tokenize(CAT)
    from_text, n_text = engine.embed([CAT])
    from_ids, n_ids = engine.embed([tokens])
    assert n_text == n_ids == len(tokens)
    assert np.abs(np.asarray(from_text) - np.asarray(from_ids)).max() < 1e-6


def test_related_sentences_are_closer_than_unrelated(engine):
    (cat, kitten, stocks), _ = engine.embed([CAT, KITTEN, STOCKS])
    assert cos(cat, kitten) > cos(cat, stocks)
    assert cos(cat, kitten) > cos(kitten, stocks)


@pytest.mark.parametrize("inputs, message", [
    ([], "input must not be empty"),
    ([""], r"input\[0\] is empty"),
    (["fine", []], r"input\[1\] is empty"),
    ([[1, 2, 10**9]], r"input\[0\]: token id 1000000000 is outside the vocabulary \(0\.\.49151\)"),
    ([[-1]], "token id -1 is outside the vocabulary"),
    (["\ud800"], "lone surrogate"),
])
def test_bad_inputs_are_refused_before_llama_cpp(engine, inputs, message):
    with pytest.raises(BadRequestError, match=message):
        engine.embed(inputs)


def test_an_input_over_the_embedding_context_is_refused_and_the_engine_goes_on(engine):
    limit = engine.embedder.max_tokens
    assert limit == 512  # the engine's n_batch: one input fits one ubatch
    with pytest.raises(ContextOverflowError, match=r"input\[1\] is 601 tokens but an embedding input may hold "
                                                   r"at most 512; shorten it or raise --n-batch"):
        engine.embed(["short", [42] * 601])
    assert len(engine.embed([[42] * limit])[0][0]) == 576  # exactly the limit fits
    done = engine.generate(Request(prompt="The capital of France is", sampling=GREEDY))
    assert done.finish_reason in ("length", "stop") and done.tokens
    assert len(engine.embed([CAT])[0]) == 1


def test_embedding_while_a_generation_runs(engine):
    story = SamplingParams(temperature=0.0, max_tokens=48, ignore_eos=True)
    expected = engine.generate(Request(prompt="Once upon a time", sampling=story)).text
    alone, _ = engine.embed([CAT, STOCKS])
    stream = engine.submit(Request(prompt="Once upon a time", sampling=story))
    first = next(iter(stream))  # the first token is out: the engine thread is generating now
    assert isinstance(first, TokenEvent)
    results = []
    workers = [threading.Thread(target=lambda: results.append(engine.embed([CAT, STOCKS])[0])) for _ in range(2)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=120)
    done = stream.result()
    assert len(results) == 2
    for vectors in results:
        assert np.abs(np.asarray(vectors) - np.asarray(alone)).max() < 1e-4
    assert first.text + done.text == expected  # greedy text unchanged by the embedding calls beside it
    assert len(done.tokens) == 47


def test_rerank_is_refused_on_a_model_without_a_ranking_head(engine):
    assert engine.can_rerank is False
    with pytest.raises(BadRequestError, match="mean pooling, not a ranking head"):
        engine.rerank("What is a cat?", ["A cat is an animal."])


@pytest.fixture(scope="module")
def reranker(make_engine, tmp_path_factory):
    path = write_tiny_reranker(tmp_path_factory.mktemp("rerank") / "tiny-rerank.gguf")
    return make_engine(path, ctx=64, n_batch=64, parallel=1)


def test_rerank_scores_each_document_as_alone(reranker):
    assert reranker.can_rerank and reranker.embedding_size == 1
    query, docs = "what is a cat ?", ["the cat sat on the mat .", "stocks fell .", "a dog is an animal ."]
    scores, n_tokens = reranker.rerank(query, docs)
    assert len(scores) == 3 and all(np.isfinite(scores)) and len(set(scores)) == 3
    assert reranker.rerank(query, docs)[0] == scores  # deterministic
    alone = [reranker.rerank(query, [d])[0][0] for d in docs]
    assert np.abs(np.asarray(scores) - np.asarray(alone)).max() < 1e-5
    # [CLS] query [SEP] [SEP] doc [SEP], as llama-server formats a BERT reranker's pairs
    words = lambda text: len(reranker.model.tokenize(text, add_special=False))
    assert n_tokens == sum(4 + words(query) + words(d) for d in docs)


def test_rerank_refusals(reranker):
    with pytest.raises(BadRequestError, match="reranker"):
        reranker.embed(["the cat"])
    with pytest.raises(BadRequestError, match="documents must not be empty"):
        reranker.rerank("the cat", [])
    with pytest.raises(BadRequestError, match=r"documents\[1\] is empty"):
        reranker.rerank("the cat", ["a cat", ""])
    with pytest.raises(ContextOverflowError, match=r"documents\[0\] is 66 tokens but an embedding input may hold "
                                                   r"at most 64"):
        reranker.rerank("the cat", ["cat " * 60])
    assert len(reranker.rerank("the cat", ["a cat"])[0]) == 1


def test_the_embedding_context_counts_in_the_models_footprint_once_used(smollm2_path):
    from edge_infer.config import EngineSettings
    from edge_infer.host import ModelHost

    with ModelHost(on_demand=False) as host:
        host.load(str(smollm2_path), EngineSettings(ctx=512, parallel=1, n_threads=2))
        before = host.current.footprint.ram
        with host.acquire() as lease:
            assert lease.engine.embedding_bytes == 0                   # nothing until first used
            lease.engine.embed(["a cat"])
        vocab = lease.engine.model.n_vocab
        assert host.current.footprint.ram - before == lease.engine.embedding_bytes >= 2 * 512 * vocab * 4
