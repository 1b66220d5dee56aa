"""One model over two loopback workers, neither of which can hold it alone: it loads (in a
process of its own) and answers what the local run answers."""

from __future__ import annotations

from dataclasses import replace

from edge_infer.config import EngineSettings
from edge_infer.engine import Engine, Request, SamplingParams
from edge_infer.engine.child import ChildEngine
from edge_infer.engine.devices.placement import place
from edge_infer.gguf.info import read_model_info

PROMPT = "The capital of France is"
GREEDY = SamplingParams(temperature=0.0, max_tokens=24, ignore_eos=True)


def test_a_model_neither_worker_holds_alone_answers_across_two(workers, smollm2_path):
    a, b = workers(2)
    settings = EngineSettings(ctx=512, parallel=1, n_threads=1, draft_max=0, rpc=(a.endpoint, b.endpoint))
    alone = place(read_model_info(smollm2_path), replace(settings, rpc=(a.endpoint,)), warn=False)
    assert dict((d, n) for d, n, _ in alone.plan.placement())["CPU"] > 0  # one worker cannot hold it

    split = ChildEngine(smollm2_path, settings, name="smollm2")
    try:
        layers = {d: n for d, n, _ in split.placement.plan.placement()}
        assert layers["CPU"] == 0 and layers["RPC0"] > 0 and layers["RPC1"] > 0, layers
        held = {d.device: d.model_bytes for d in split.snapshot().devices}
        assert held["RPC0"] > 0 and held["RPC1"] > 0  # llama.cpp's own buffers on each worker
        got = split.generate(Request(prompt=PROMPT, sampling=GREEDY))
    finally:
        split.close()
    local = Engine(smollm2_path, replace(settings, rpc=()))
    try:
        want = local.generate(Request(prompt=PROMPT, sampling=GREEDY))
    finally:
        local.close()
    assert got.finish_reason == "length" and got.tokens == want.tokens, (got.text, want.text)
