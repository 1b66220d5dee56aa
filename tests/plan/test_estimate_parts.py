"""The estimate split into its parts (KV layout, compute buffers, offload) gives the numbers
the single function gave before the split: every field, on the real models, over the
configurations the plan and the engine use (split and unified KV, sliding windows, KV types,
GPU layers, several devices, a device that refuses the output matrix).

estimates_before_split.json holds what estimate_memory returned before the split. A
deliberate change to the estimate rewrites it: `python -m tests.plan.test_estimate_parts`.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from edge_infer.gguf.info import read_model_info
from edge_infer.plan import estimate_memory
from edge_infer.units import MiB

EXPECTED = Path(__file__).with_name("estimates_before_split.json")
Q8_0 = 34 / 32

# (model alias, ctx, parallel, options)
CASES = [
    ("smollm2", 4096, 1, {}),
    ("smollm2", 2048, 4, {"kv_unified": True, "flash_attn": True, "kv_budget": "8192cells"}),
    ("smollm2", 1024, 2, {"kv_unified": True, "flash_attn": True, "prompt_cache_bytes": 64 * MiB,
                          "k_type_bytes": Q8_0}),
    ("smollm2", 3000, 3, {"n_batch": 256, "n_ubatch": 128}),
    ("smollm2", 4096, 1, {"n_gpu_layers": 11}),
    ("smollm2", 4096, 1, {"n_gpu_layers": 1}),
    ("smollm2", 4096, 8, {"n_gpu_layers": -1, "split": (3.0, 1.0), "kv_unified": True}),
    ("smollm2", 2048, 4, {"n_gpu_layers": -1, "max_tensor": 128 * MiB}),
    ("gemma3", 4096, 1, {}),
    ("gemma3", 2048, 4, {"swa_full": True}),
    ("gemma3", 2048, 4, {"kv_unified": True, "flash_attn": True, "kv_budget": "512MiB"}),
    ("gemma3", 2048, 4, {"n_gpu_layers": -1, "max_tensor": 128 * MiB, "kv_unified": True, "flash_attn": True}),
    ("gemma3", 8192, 2, {"n_gpu_layers": 10, "split": (1.0, 1.0, 2.0), "kv_type_bytes": Q8_0}),
    ("gemma3", 32768, 1, {"n_gpu_layers": 19, "kv_unified": True, "flash_attn": True, "swa_full": True,
                          "v_type_bytes": Q8_0, "prompt_cache_bytes": 256 * MiB}),
]


def case_id(case) -> str:
    alias, ctx, parallel, options = case
    return " ".join([f"{alias} {ctx}x{parallel}", *(f"{k}={v}" for k, v in sorted(options.items()))])


def estimates(paths: dict[str, Path]) -> dict[str, dict]:
    infos = {alias: read_model_info(path) for alias, path in paths.items()}
    return {case_id(c): json.loads(json.dumps(estimate_memory(infos[c[0]], c[1], c[2], **c[3]).to_dict()))
            for c in CASES}


@pytest.fixture(scope="module")
def now(smollm2_path, gemma3_path):
    return estimates({"smollm2": smollm2_path, "gemma3": gemma3_path})


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_the_parts_add_up_to_the_estimate_before_the_split(case, now):
    assert now[case_id(case)] == json.loads(EXPECTED.read_text())[case_id(case)]


if __name__ == "__main__":
    from tests.conftest import REAL_MODELS_DIR
    from edge_infer.store.store import ModelStore

    store = ModelStore(REAL_MODELS_DIR)
    found = estimates({a: store.ensure(a, progress=lambda msg: None) for a in ("smollm2", "gemma3")})
    EXPECTED.write_text(json.dumps(found, indent=1) + "\n")
