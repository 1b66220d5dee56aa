"""The memory plan against what llama.cpp itself allocates: create real contexts
(CPU, no decoding) and read the buffer sizes it logs."""

import ctypes
import re
from contextlib import contextmanager

import llama_cpp
import pytest

from edge_infer.gguf.info import read_model_info
from edge_infer.plan import estimate_memory
from edge_infer.units import MiB


@contextmanager
def captured_llama_log():
    """Collect llama.cpp's log lines, then put back whichever callback was installed."""
    lines: list[str] = []

    @llama_cpp.llama_log_callback
    def collect(level, text, user_data):
        lines.append(text.decode("utf-8", errors="replace"))

    prev_cb, prev_data = llama_cpp.llama_log_callback(), ctypes.c_void_p()
    llama_cpp.llama_log_get(ctypes.byref(prev_cb), ctypes.byref(prev_data))
    llama_cpp.llama_log_set(collect, ctypes.c_void_p(0))
    try:
        yield lines
    finally:
        llama_cpp.llama_log_set(prev_cb, prev_data)


def _mib(lines, kind):
    return sum(float(x) for x in re.findall(rf"{kind} buffer size\s*=\s*([\d.]+) MiB", "".join(lines)))


def llama_buffers(path, *, ctx, parallel, n_batch=512, kv_unified=False, swa_full=False, flash_attn=True):
    """(KV MiB, compute MiB) llama.cpp reports for one context of this shape."""
    from edge_infer.engine.native.llama import init_backend

    init_backend()  # the portable build loads its CPU backend here (llama_backend_init does not)
    with captured_llama_log() as lines:
        mparams = llama_cpp.llama_model_default_params()
        mparams.n_gpu_layers = 0
        model = llama_cpp.llama_model_load_from_file(str(path).encode(), mparams)
        assert model, "llama.cpp could not load the model"
        try:
            cparams = llama_cpp.llama_context_default_params()
            cparams.n_ctx = ctx * parallel
            cparams.n_seq_max = parallel
            cparams.n_batch = cparams.n_ubatch = n_batch
            cparams.n_threads = cparams.n_threads_batch = 1
            cparams.kv_unified = kv_unified
            cparams.swa_full = swa_full  # llama.cpp's default is true; the engine's is false
            cparams.flash_attn_type = (llama_cpp.LLAMA_FLASH_ATTN_TYPE_ENABLED if flash_attn
                                       else llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED)
            context = llama_cpp.llama_init_from_model(model, cparams)
            assert context, "llama.cpp could not create the context"
            llama_cpp.llama_free(context)
        finally:
            llama_cpp.llama_model_free(model)
    return _mib(lines, "KV"), _mib(lines, "compute")


@pytest.mark.parametrize("which", ["smollm2", "gemma3"])
@pytest.mark.parametrize("kv_unified", [False, True])
def test_plan_within_15_percent_of_llamacpp(request, which, kv_unified):
    path = request.getfixturevalue(f"{which}_path")
    info = read_model_info(path)
    kv_mib, compute_mib = llama_buffers(path, ctx=2048, parallel=4, kv_unified=kv_unified)
    est = estimate_memory(info, 2048, 4, kv_unified=kv_unified, flash_attn=True, kv_budget="8192cells")
    assert kv_mib > 0 and compute_mib > 0
    assert abs(est.kv_bytes / MiB - kv_mib) / kv_mib < 0.15, (est.kv_bytes / MiB, kv_mib)
    assert abs(est.compute_bytes / MiB - compute_mib) / compute_mib < 0.15, (est.compute_bytes / MiB, compute_mib)


def test_swa_full_and_no_flash_attention(gemma3_path):
    info = read_model_info(gemma3_path)
    kv_mib, compute_mib = llama_buffers(gemma3_path, ctx=2048, parallel=4, swa_full=True, flash_attn=False)
    est = estimate_memory(info, 2048, 4, swa_full=True, flash_attn=False)
    assert abs(est.kv_bytes / MiB - kv_mib) / kv_mib < 0.15
    # Without flash attention llama.cpp reserves attention scratch for 256 cells and grows it
    # as the context fills; the plan budgets the full context, so it may only be larger.
    assert est.compute_bytes / MiB >= compute_mib
