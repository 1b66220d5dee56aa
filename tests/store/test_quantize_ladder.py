"""Local quantization and the quant ladder on the real SmolLM2 (Q4_1): widen to F16 with
the gguf package, quantize down with llama.cpp, then compare the levels."""

from __future__ import annotations

import json

import pytest

from edge_infer import cli
from edge_infer.store.quantize import check_direction
from edge_infer.store.store import ModelStore


def test_direction_rules():
    assert check_direction("F16", "Q4_K_M", allow_requantize=False) is None
    assert check_direction("BF16", "Q8_0", allow_requantize=False) is None
    assert check_direction("F32", "F16", allow_requantize=False) is None
    assert "lower to higher precision" in check_direction("Q4_K_M", "Q8_0", allow_requantize=False).reason
    assert "lower to higher precision" in check_direction("F16", "F32", allow_requantize=False).reason
    assert "already quantized" in check_direction("Q8_0", "Q4_0", allow_requantize=False).reason
    assert check_direction("Q8_0", "Q4_0", allow_requantize=True) is None
    assert "importance matrix" in check_direction("F16", "IQ2_XS", allow_requantize=True).reason
    assert "not a quantization level" in check_direction("F16", "Q9_9", allow_requantize=True).reason


@pytest.fixture
def smol_installed(edge_home, smollm2_path, capsys):
    assert cli.main(["import", str(smollm2_path)]) == 0
    capsys.readouterr()
    return "SmolLM2-135M-Instruct"


def test_quantize_refuses_with_an_explanation(smol_installed, capsys):
    assert cli.main(["quantize", smol_installed, "--to", "Q4_0,Q8_0"]) == 2
    err = capsys.readouterr().err
    assert "Q4_0: the source is already quantized (Q4_1)" in err and "--from-f16" in err
    assert "Q8_0: Q4_1 -> Q8_0 goes from lower to higher precision" in err
    assert [m.quant for m in ModelStore().installed()] == ["Q4_1"]  # nothing was made
    # Asked for explicitly, it is done.
    assert cli.main(["quantize", smol_installed, "--to", "Q4_0", "--allow-requantize"]) == 0
    assert sorted(m.quant for m in ModelStore().installed()) == ["Q4_0", "Q4_1"]


def test_widen_to_f16_keeps_metadata(smollm2_path, tmp_path):
    from edge_infer.gguf.header import read_header
    from edge_infer.gguf.widen import widen_to_f16

    out = widen_to_f16(smollm2_path, tmp_path / "smol.F16.gguf")
    src, dst = read_header(smollm2_path), read_header(out)
    assert dst.fields["general.file_type"] == 1
    assert {k: v for k, v in dst.fields.items() if k != "general.file_type"} == \
        {k: v for k, v in src.fields.items() if k != "general.file_type"}
    assert [t.name for t in dst.tensors] == [t.name for t in src.tensors]
    assert [t.shape for t in dst.tensors] == [t.shape for t in src.tensors]
    assert {t.type.name for t in dst.tensors if len(t.shape) == 1} == {"F32"}
    assert {t.type.name for t in dst.tensors if len(t.shape) == 2} == {"F16"}


def test_quantize_from_f16_then_ladder(smol_installed, edge_home, capsys):
    assert cli.main(["quantize", smol_installed, "--from-f16", "--to", "Q8_0,Q4_0,Q2_K"]) == 0
    out = capsys.readouterr()
    assert "cannot be more accurate than Q4_1" in out.err  # Q8_0 above the original: said so
    store = ModelStore()
    levels = {m.quant: m for m in store.installed()}
    assert set(levels) == {"F16", "Q8_0", "Q4_1", "Q4_0", "Q2_K"}
    assert levels["F16"].source == "quantize" and levels["F16"].derived_from == f"{smol_installed}:Q4_1"
    assert levels["Q2_K"].derived_from == f"F16 from {smol_installed}:Q4_1"
    assert levels["Q8_0"].size > levels["Q4_0"].size > levels["Q2_K"].size
    # Already there: skipped, not redone.
    assert cli.main(["quantize", smol_installed, "--from-f16", "--to", "Q8_0"]) == 0
    assert "already installed" in capsys.readouterr().out

    assert cli.main(["ladder", smol_installed, "--levels", "F16,Q8_0,Q4_0,Q2_K", "--tokens", "128"]) == 0
    table = capsys.readouterr().out
    assert "PPL" in table and "KL mean" in table and "saved to" in table
    saved = edge_home / "ladders" / "smollm2-135m-instruct.json"
    data = json.loads(saved.read_text())
    rows = {r["quant"]: r for r in data["rows"]}
    assert [r["quant"] for r in data["rows"]] == ["F16", "Q8_0", "Q4_0", "Q2_K"]
    assert data["n_tokens"] == 128 and data["prompt_tokens"] == 32 and "pydoc_data.topics" in data["text_source"]
    ppl = [rows[q]["perplexity"] for q in ("F16", "Q8_0", "Q4_0", "Q2_K")]
    # Perplexity rises as bits fall. F16 and Q8_0 are within the noise of a 128-token perplexity
    # of each other: on an AMD Zen 4 machine (2026-12-07, this tree and 892bd5c alike) Q8_0
    # measured 2.8% below F16 (16.82 against 17.31), so the band is 5%, not 1%.
    assert ppl[1] >= ppl[0] * 0.95 and ppl[2] > ppl[1] and ppl[3] > ppl[2], ppl
    assert rows["F16"]["reference"] and rows["F16"]["kl_mean"] is None
    kl = [rows[q]["kl_mean"] for q in ("Q8_0", "Q4_0", "Q2_K")]
    assert 0 < kl[0] < kl[1] < kl[2], kl
    assert rows["Q8_0"]["top1_agree"] > rows["Q2_K"]["top1_agree"]
    for r in data["rows"]:
        assert r["load_s"] > 0 and r["decode_tok_s"] > 0 and r["prefill_tok_s"] > 0 and r["rss_bytes"] > 0


def test_evaluation_scores_every_position_past_the_default_max_tokens(smollm2_path):
    """400 tokens: 300 forced, more than SamplingParams' default max_tokens (256)."""
    from edge_infer.bench.ladder import eval_text, evaluate
    from edge_infer.config import EngineSettings

    text, _ = eval_text()
    fields, tokens, logprobs = evaluate(smollm2_path, EngineSettings(ctx=464, parallel=1, n_threads=2),
                                        text=text, n_tokens=400)
    assert len(tokens) == 400 and len(logprobs) == 300
    assert 1.0 < fields["perplexity"] < 100.0
