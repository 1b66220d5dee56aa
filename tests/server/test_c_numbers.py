"""Numbers before C (issue 47, item 6): every request number that reaches a llama.cpp call is
checked first. Each bad value is a 4xx naming its field, on every face that takes it, and the
server serves on; each edge value that is valid is answered 2xx. The engine's own check
(engine.sampling.check_params) is tested directly too, for callers that bypass the wire
(the app, the CLI)."""

from __future__ import annotations

import math

import httpx
import pytest

from edge_infer.engine import BadRequestError, Request, SamplingParams
from edge_infer.engine.sampling import RANDOM_SEED, check_params, dist_seed

V = 49152  # SmolLM2's vocabulary (checked against the engine below)
Q = [{"role": "user", "content": "Hi"}]
BIG = 2**63


def chat(**kw) -> tuple[str, dict]:
    return "/v1/chat/completions", {"messages": Q, "max_tokens": 2, **kw}


def text(**kw) -> tuple[str, dict]:
    return "/v1/completions", {"prompt": "Hi", "max_tokens": 2, **kw}


BAD = {  # name -> (route, body or raw bytes, the field the answer must name)
    "prompt token = n_vocab": (*text(prompt=[1, V]), "prompt"),
    "prompt token -1": (*text(prompt=[-1]), "prompt"),
    "prompt token 2^63": (*text(prompt=[[1, 2], [BIG]]), "prompt"),
    "prompt token 2^70": (*text(prompt=[2**70]), "prompt"),
    "prompt tokens empty": (*text(prompt=[[]]), "prompt"),
    "detokenize n_vocab": ("/detokenize", {"tokens": [0, V]}, "tokens"),
    "detokenize -5": ("/detokenize", {"tokens": [-5]}, "tokens"),
    "detokenize 2^64": ("/detokenize", {"tokens": [2**64]}, "tokens"),
    "embeddings token n_vocab": ("/v1/embeddings", {"input": [[1, V]]}, "input"),
    "logit_bias id n_vocab": (*chat(logit_bias={str(V): 1}), "logit_bias"),
    "logit_bias id 11 digits": (*chat(logit_bias={"12345678901": 1}), "logit_bias"),
    "logit_bias id negative": (*chat(logit_bias={"-1": 1}), "logit_bias"),
    "logit_bias 101": (*chat(logit_bias={"5": 101}), "logit_bias"),
    "logit_bias NaN": ("/v1/chat/completions", b'{"messages":[{"role":"user","content":"Hi"}],"logit_bias":{"5":NaN}}',
                       "logit_bias"),
    "seed 2^64": (*text(seed=2**64), "seed"),
    "seed -2^63-1": (*text(seed=-BIG - 1), "seed"),
    "seed 1.5": (*text(seed=1.5), "seed"),
    "temperature NaN": ("/v1/completions", b'{"prompt":"Hi","temperature":NaN}', "temperature"),
    "temperature -0.1": (*text(temperature=-0.1), "temperature"),
    "temperature 2.1": (*chat(temperature=2.1), "temperature"),
    "top_k -1": (*text(top_k=-1), "top_k"),
    "top_k 2^31": (*text(top_k=2**31), "top_k"),
    "top_p -0.1": (*text(top_p=-0.1), "top_p"),
    "top_p 1.5": (*text(top_p=1.5), "top_p"),
    "min_p 1.5": (*text(min_p=1.5), "min_p"),
    "min_p -Infinity": ("/v1/completions", b'{"prompt":"Hi","min_p":-Infinity}', "min_p"),
    "repeat_penalty 0": (*text(repeat_penalty=0), "repeat_penalty"),
    "repeat_penalty -1": (*text(repeat_penalty=-1), "repeat_penalty"),
    "repeat_penalty 1e-7": (*text(repeat_penalty=1e-7), "repeat_penalty"),
    "repeat_penalty 1e308": (*text(repeat_penalty=1e308), "repeat_penalty"),
    "presence_penalty 2.5": (*text(presence_penalty=2.5), "presence_penalty"),
    "frequency_penalty Infinity": ("/v1/completions", b'{"prompt":"Hi","frequency_penalty":Infinity}',
                                   "frequency_penalty"),
    "n 0": (*text(n=0), "n"),
    "n 17": (*chat(n=17), "n"),
    "max_tokens 0": (*chat(max_tokens=0), "max_tokens"),
    "max_tokens -1": (*text(max_tokens=-1), "max_tokens"),
    "top_logprobs 21": (*chat(logprobs=True, top_logprobs=21), "top_logprobs"),
    "logprobs 21 (legacy)": (*text(logprobs=21), "logprobs"),
    "speculative 33": (*text(speculative=33), "speculative"),
    # SmolLM2 has no FIM tokens: /infill checks the numbers before building its prompt.
    "infill top_k -5": ("/infill", {"input_prefix": "def f(", "input_suffix": ")", "top_k": -5}, "top_k"),
    "infill seed 2^64": ("/infill", {"input_prefix": "x", "seed": 2**64}, "seed"),
    "ollama repeat_penalty 0": ("/api/generate", {"model": "smollm2", "prompt": "Hi", "stream": False,
                                                  "options": {"repeat_penalty": 0}}, "repeat_penalty"),
    "ollama seed 2^64": ("/api/chat", {"model": "smollm2", "messages": Q, "stream": False,
                                       "options": {"seed": 2**64}}, "seed"),
    "ollama top_k 2^40": ("/api/generate", {"model": "smollm2", "prompt": "Hi", "stream": False,
                                            "options": {"top_k": 2**40}}, "top_k"),
    "anthropic top_k 2^40": ("/v1/messages", {"model": "smollm2", "max_tokens": 2, "messages": Q, "top_k": 2**40},
                             "top_k"),
    "anthropic temperature 1.5": ("/v1/messages", {"model": "smollm2", "max_tokens": 2, "messages": Q,
                                                   "temperature": 1.5}, "temperature"),
    "responses temperature 3": ("/v1/responses", {"model": "smollm2", "input": "Hi", "temperature": 3,
                                                  "max_output_tokens": 2}, "temperature"),
}


def post(served, route: str, body) -> httpx.Response:
    if isinstance(body, bytes):
        return httpx.post(served.url + route, content=body, headers={"Content-Type": "application/json"}, timeout=60)
    return httpx.post(served.url + route, json=body, timeout=60)


def test_smollm2_vocabulary_is_what_the_cases_assume(served):
    assert served.engine.model.n_vocab == V


@pytest.mark.parametrize("name", list(BAD))
def test_bad_number_is_a_4xx_naming_its_field(served, name):
    route, body, field = BAD[name]
    r = post(served, route, body)
    assert 400 <= r.status_code < 500, (name, r.status_code, r.text)
    assert field in r.text, (name, r.text)
    assert httpx.get(served.url + "/health", timeout=10).status_code == 200


GOOD = {
    "seed -1 (random)": text(seed=-1), "seed 0": text(seed=0), "seed 2^32-1": text(seed=2**32 - 1),
    "seed 2^32": text(seed=2**32), "seed 2^64-1": text(seed=2**64 - 1), "seed -2^63": text(seed=-BIG),
    "top_k 0 (off)": text(top_k=0), "top_k 2^31-1": text(top_k=2**31 - 1),
    "temperature 0": text(temperature=0), "temperature 2": chat(temperature=2),
    "top_p 0 (greedy)": text(top_p=0), "top_p 1": text(top_p=1), "min_p 0": text(min_p=0), "min_p 1": text(min_p=1),
    "repeat_penalty 1e-6": text(repeat_penalty=1e-6), "repeat_penalty 1e6": text(repeat_penalty=1e6),
    "presence_penalty ±2": text(presence_penalty=2, frequency_penalty=-2),
    "logit_bias edges": chat(logit_bias={"0": -100, str(V - 1): 100}),
    "prompt tokens 0 and n_vocab-1": text(prompt=[0, V - 1]),
    "top_logprobs 20": chat(logprobs=True, top_logprobs=20), "logprobs 20 (legacy)": text(logprobs=20),
    "n 16": text(n=16, max_tokens=1), "speculative 32": text(speculative=32),
    "detokenize 0 and n_vocab-1": ("/detokenize", {"tokens": [0, V - 1]}),
    "ollama seed -1": ("/api/generate", {"model": "smollm2", "prompt": "Hi", "stream": False,
                                         "options": {"seed": -1, "num_predict": 2}}),
}


@pytest.mark.parametrize("name", list(GOOD))
def test_valid_edge_value_is_answered(served, name):
    route, body = GOOD[name]
    r = post(served, route, body)
    assert r.status_code == 200, (name, r.text)


def sampled(served, seed: int) -> str:
    r = post(served, *text(prompt="Once upon a time", seed=seed, temperature=1.5, min_p=0, max_tokens=8))
    assert r.status_code == 200, r.text
    return r.json()["choices"][0]["text"]


def test_seeds_are_reduced_modulo_2_32_and_always_repeat(served):
    # 2^32-1 is llama.cpp's "draw a random seed": taken as 2^32-2, so the reply repeats.
    assert sampled(served, 2**32 - 1) == sampled(served, 2**32 - 1) == sampled(served, 2**32 - 2)
    assert sampled(served, 7) == sampled(served, 7 + 2**32) == sampled(served, 7 - 2**32)


def test_dist_seed():
    assert dist_seed(2**32 - 1) == 2**32 - 2 and dist_seed(-2) == 2**32 - 2 and dist_seed(5 + 2**40) == 5
    assert all(dist_seed(s) != RANDOM_SEED for s in (None, -1, 2**64 - 1, -(2**63)))


ENGINE_BAD = {  # what the app and the CLI could hand the engine without a wire schema in between
    "temperature": math.nan, "top_p": math.inf, "min_p": math.nan, "repeat_penalty": 0.0,
    "presence_penalty": 1e39, "frequency_penalty": -math.inf, "top_k": 2**31, "repeat_last_n": 2**40,
    "logit_bias": ((V, 1.0),), "seed": 1.5,
}


@pytest.mark.parametrize("field", list(ENGINE_BAD))
def test_engine_refuses_unfit_sampling_numbers_itself(served, field):
    params = SamplingParams(**{field: ENGINE_BAD[field]}, max_tokens=2)
    with pytest.raises(ValueError, match=f"^{field}: "):
        check_params(served.engine.model, params)
    with pytest.raises(BadRequestError, match=field):
        served.engine.submit(Request(prompt="Hi", sampling=params))
    assert served.engine.generate(Request(prompt="Hi", sampling=SamplingParams(max_tokens=2)))
