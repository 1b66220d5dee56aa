"""Memory plan arithmetic. Golden KV sizes were read from llama.cpp 0.3.36's own
"KV buffer size" log lines (see tests/store/test_memory_vs_llamacpp.py for the live check)."""

import pytest

from edge_infer.plan import estimate_memory, max_context
from edge_infer.units import MiB
from edge_infer.gguf.info import read_model_info


@pytest.fixture(scope="module")
def smol(smollm2_path):
    return read_model_info(smollm2_path)


@pytest.fixture(scope="module")
def gemma(gemma3_path):
    return read_model_info(gemma3_path)


@pytest.mark.parametrize("ctx,parallel,n_batch,unified,swa_full,kv_mib", [
    (2048, 4, 512, False, False, 84.0),    # SWA: pad(min(2048, 512 + 512)) = 1024 cells per sequence
    (2048, 4, 512, False, True, 144.0),    # full-size SWA cache
    (2048, 4, 512, True, False, 61.5),     # unified: pad(min(8192, 512*4 + 512)) = 2560 cells
    (4096, 1, 512, False, False, 27.0),
    (1000, 1, 512, False, False, 18.0),    # ctx padded to 1024, window cache capped by it
    (2048, 4, 256, False, False, 69.0),    # smaller ubatch, smaller window cache
    (600, 3, 128, False, False, 40.5),     # 1800 -> 2048 -> 682/seq -> 768/seq
    (8192, 2, 512, True, False, 70.5),
])
def test_gemma3_kv_matches_llamacpp(gemma, ctx, parallel, n_batch, unified, swa_full, kv_mib):
    est = estimate_memory(gemma, ctx, parallel, n_batch=n_batch, kv_unified=unified, swa_full=swa_full,
                          kv_budget=f"{ctx * parallel}cells")  # the pool as large as all slots
    assert est.kv_bytes == kv_mib * MiB


@pytest.mark.parametrize("ctx,parallel,kv_mib", [(2048, 4, 180.0), (4096, 1, 90.0), (1000, 1, 22.5)])
def test_smollm2_kv_matches_llamacpp(smol, ctx, parallel, kv_mib):
    for unified in (False, True):
        assert estimate_memory(smol, ctx, parallel, kv_unified=unified,
                               kv_budget=f"{ctx * parallel}cells").kv_bytes == kv_mib * MiB


def test_totals_and_per_token(smol, gemma):
    est = estimate_memory(smol, 4096, 1)
    # What the RSS reaches on the CPU: the touched part of the compute reserve, plus the runtime.
    assert est.total_bytes == (est.weights_bytes + est.kv_bytes + est.compute_resident_bytes
                               + est.output_bytes + est.runtime_bytes)
    assert est.compute_resident_bytes == est.compute_bytes - 511 * smol.vocab_size * 4
    with_cache = estimate_memory(smol, 4096, 1, prompt_cache_bytes=64 * MiB)
    assert with_cache.total_bytes == est.total_bytes + 64 * MiB == with_cache.cpu_bytes
    assert est.kv_bytes_per_token == 30 * 3 * (64 + 64) * 2
    assert est.weights_bytes == smol.weights_bytes
    # Gemma: only the 3 full-attention layers grow with the context.
    assert estimate_memory(gemma, 4096, 1).kv_bytes_per_token == 3 * 1 * (256 + 256) * 2
    assert estimate_memory(gemma, 4096, 1, swa_full=True).kv_bytes_per_token == 18 * 512 * 2


def test_compute_is_dominated_by_logits(smol, gemma):
    # Flash attention: close to what llama.cpp reserves (SmolLM2 102.5 MiB, Gemma 3 514.5 MiB).
    for info, reported in ((smol, 102.51), (gemma, 514.5)):
        est = estimate_memory(info, 2048, 4, flash_attn=True)
        assert est.compute_bytes >= 512 * info.vocab_size * 4
        assert abs(est.compute_bytes / MiB - reported) / reported < 0.15
    # Without it the KQ matrix for a full context is added on top.
    assert estimate_memory(smol, 4096, 1).compute_bytes > estimate_memory(smol, 4096, 1, flash_attn=True).compute_bytes
    assert estimate_memory(smol, 4096, 1, n_batch=256).compute_bytes < estimate_memory(smol, 4096, 1).compute_bytes


def test_kv_type_bytes_scales_kv(smol):
    f16 = estimate_memory(smol, 2048, 1).kv_bytes
    assert estimate_memory(smol, 2048, 1, kv_type_bytes=34 / 32).kv_bytes == pytest.approx(f16 * 17 / 32, rel=1e-6)


def test_gpu_split(smol):
    cpu_only = estimate_memory(smol, 2048, 1)
    assert cpu_only.gpu_bytes == 0 and cpu_only.cpu_bytes == cpu_only.total_bytes and cpu_only.gpu_layers == 0
    # llama.cpp counts the output layer as slot n_layer: 1 GPU "layer" = just the output.
    one = estimate_memory(smol, 2048, 1, n_gpu_layers=1)
    assert one.output_on_gpu and one.gpu_layers == 0
    ten = estimate_memory(smol, 2048, 1, n_gpu_layers=11)
    assert ten.gpu_layers == 10
    assert ten.gpu_bytes - one.gpu_bytes == sum(smol.layer_weight_bytes[20:]) + 10 * cpu_only.kv_bytes // 30
    full = estimate_memory(smol, 2048, 1, n_gpu_layers=-1)
    assert full.gpu_layers == 30 and full.output_on_gpu
    # Tied embeddings: token_embd stays on the CPU and a copy goes to the GPU for the output.
    # On the GPU the whole compute reserve is allocated for real (VRAM), on the CPU only touched.
    assert full.cpu_bytes == smol.input_weight_bytes + full.output_bytes + full.runtime_bytes
    assert full.total_bytes == (cpu_only.total_bytes + smol.input_weight_bytes
                                + full.device_compute_bytes - cpu_only.compute_resident_bytes)


def test_max_context(smol):
    budget = estimate_memory(smol, 3000, 1).total_bytes
    best = max_context(smol, budget)
    assert best % 256 == 0 and 2816 <= best <= 3072
    assert estimate_memory(smol, best, 1).total_bytes <= budget
    assert max_context(smol, 1) == 0
    assert max_context(smol, 10**12) == smol.context_length


def test_rejects_nonsense(smol):
    with pytest.raises(ValueError):
        estimate_memory(smol, 0, 1)


def test_k_and_v_type_bytes(smol):
    f16 = estimate_memory(smol, 2048, 1).kv_bytes
    q8 = estimate_memory(smol, 2048, 1, k_type_bytes=34 / 32, v_type_bytes=34 / 32).kv_bytes
    half = estimate_memory(smol, 2048, 1, k_type_bytes=34 / 32).kv_bytes
    assert q8 == pytest.approx(f16 * 17 / 32, rel=1e-6)
    assert half == pytest.approx((f16 + q8) / 2, rel=1e-6)
