"""Quant names and levels from file names, and a GGUF header parsed from a prefix of its bytes
(what a ranged remote read gets): no network, no llama.cpp."""

from __future__ import annotations

import pytest

from edge_infer.gguf import quant_types as qt


@pytest.mark.parametrize("name, quant, stem", [
    ("SmolLM2-135M-Instruct.Q4_1.gguf", "Q4_1", "SmolLM2-135M-Instruct"),
    ("gemma-3-270m-q4_k_m.gguf", "Q4_K_M", "gemma-3-270m"),
    ("Meta-Llama-3-8B-Instruct-IQ2_XXS.gguf", "IQ2_XXS", "Meta-Llama-3-8B-Instruct"),
    ("Qwen3-30B-UD-Q4_K_XL-00001-of-00002.gguf", "UD-Q4_K_XL", "Qwen3-30B"),
    ("model-f16.gguf", "F16", "model"),
    ("phi-2.Q5_K.gguf", "Q5_K", "phi-2"),
    ("plain.gguf", None, "plain"),
])
def test_quant_and_stem_from_file_names(name, quant, stem):
    assert qt.quant_from_filename(name) == quant
    assert qt.model_stem(name) == stem


def test_quant_table():
    assert qt.canonical("q4_k") == "Q4_K_M" and qt.canonical("fp16") == "F16"
    assert qt.lookup("Q4_K_M").ftype == 15 and qt.lookup("Q8_0").ftype == 7
    order = sorted(["Q2_K", "F16", "Q4_K_M", "Q8_0", "Q6_K", "Q3_K_M"], key=qt.precision_key)
    assert order == ["Q2_K", "Q3_K_M", "Q4_K_M", "Q6_K", "Q8_0", "F16"]
    assert not qt.is_quantized("BF16") and qt.is_quantized("Q8_0")
    assert qt.split_info("x-Q8_0-00002-of-00003.gguf") == ("x-Q8_0", 2, 3)


def test_header_prefix_parsing(tiny_gguf):
    from edge_infer.errors import ModelFileError
    from edge_infer.gguf.header import NeedMoreBytes, parse_header_prefix, read_header

    data = tiny_gguf.read_bytes()
    whole = read_header(tiny_gguf)
    with pytest.raises(NeedMoreBytes):
        parse_header_prefix(data[:100], len(data))
    got = parse_header_prefix(data[:whole.data_offset], len(data))
    assert got.tensors == whole.tensors and got.data_offset == whole.data_offset
    with pytest.raises(ModelFileError, match="not a GGUF"):
        parse_header_prefix(b"PK\x03\x04" + bytes(100), 10_000)
