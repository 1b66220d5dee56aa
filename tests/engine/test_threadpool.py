"""The persistent CPU threadpool (llama-server's): attached at load, detached and freed at
close, and the same output as ggml's throwaway pool per graph."""

from edge_infer.engine import Request, SamplingParams
from edge_infer.engine.native.threadpool import ThreadpoolParams, GGML_MAX_N_THREADS

PROMPT = "<|im_start|>user\nName three colours.<|im_end|>\n<|im_start|>assistant\n"


def test_params_match_ggml_struct_layout():
    # bool cpumask[512]; int n_threads; int prio; uint32 poll; bool strict_cpu; bool paused
    assert ThreadpoolParams.n_threads.offset == GGML_MAX_N_THREADS
    assert ThreadpoolParams.poll.offset == GGML_MAX_N_THREADS + 8
    assert ThreadpoolParams.paused.offset == GGML_MAX_N_THREADS + 13


def test_pooled_and_unpooled_contexts_give_the_same_text(make_engine):
    pooled = make_engine(poll=50)
    plain = make_engine(poll=-1)
    assert pooled.ctx.threadpool.handle, "a CPU backend offers ggml_threadpool_new"
    assert not plain.ctx.threadpool.handle
    sampling = SamplingParams(temperature=0.0, max_tokens=24)
    assert pooled.generate(Request(prompt=PROMPT, sampling=sampling)).text == \
        plain.generate(Request(prompt=PROMPT, sampling=sampling)).text
    pooled.close()
    assert pooled.ctx.threadpool.handle is None and pooled.ctx.handle is None
    pooled.close()  # twice is harmless


def test_poll_from_the_command_line():
    import argparse

    from edge_infer.commands.common import add_engine_args, engine_settings

    p = argparse.ArgumentParser()
    add_engine_args(p)
    assert engine_settings(p.parse_args(["--poll", "0"])).poll == 0
    assert engine_settings(p.parse_args([])).poll == 50


def test_a_poll_out_of_range_is_refused_before_loading(smollm2_path):
    import pytest

    from edge_infer.config import EngineSettings
    from edge_infer.engine import Engine
    from edge_infer.errors import EdgeInferError

    with pytest.raises(EdgeInferError, match="--poll"):
        Engine(smollm2_path, EngineSettings(ctx=256, poll=101))
