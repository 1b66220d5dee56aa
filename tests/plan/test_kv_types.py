import pytest

from edge_infer.config import EngineSettings
from edge_infer.errors import EdgeInferError
from edge_infer.plan.fit import engine_estimate_kwargs
from edge_infer.plan.kv_types import check_kv_types, ggml_type, type_bytes


def test_sizes_and_ids():
    assert type_bytes("f16") == 2 and type_bytes("q8_0") == 34 / 32 and type_bytes("q4_0") == 18 / 32
    assert ggml_type("f16") == 1 and ggml_type("q8_0") == 8 and ggml_type("q4_0") == 2


def test_check_kv_types():
    check_kv_types("q8_0", "q8_0", "auto")
    check_kv_types("q4_0", "f16", "off")
    with pytest.raises(EdgeInferError, match="choose from"):
        check_kv_types("q3_k", "f16", "auto")
    with pytest.raises(EdgeInferError, match="needs flash attention: drop --flash-attn off"):
        check_kv_types("f16", "q8_0", "off")


def test_env_and_plan_kwargs(monkeypatch):
    monkeypatch.setenv("EDGE_INFER_CACHE_TYPE_K", "Q8_0")
    s = EngineSettings.from_env()
    assert (s.cache_type_k, s.cache_type_v) == ("q8_0", "f16")
    kw = engine_estimate_kwargs(s)
    assert kw["k_type_bytes"] == 34 / 32 and kw["v_type_bytes"] == 2
