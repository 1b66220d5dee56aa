"""`edge-infer ladder MODEL --kv-types ...`: one model file, once per KV cache type, on the
real SmolLM2, through the real command (an isolated home with the model imported)."""

from __future__ import annotations

import json
import math

import pytest

from edge_infer import cli
from edge_infer.bench.ladder import parse_kv_types
from edge_infer.errors import EdgeInferError


@pytest.fixture
def smol_installed(edge_home, smollm2_path, capsys):
    assert cli.main(["import", str(smollm2_path)]) == 0
    capsys.readouterr()
    return "SmolLM2-135M-Instruct"


def test_kv_ladder_reports_quality_and_speed_per_kv_type(smol_installed, edge_home, tmp_path, capsys):
    out_file = tmp_path / "kv.json"
    # One thread: two llama.cpp threads spin-wait badly on a busy 2-core machine.
    assert cli.main(["ladder", smol_installed, "--kv-types", "f16,q8_0", "--tokens", "96",
                     "--threads", "1", "--save", str(out_file)]) == 0
    out = capsys.readouterr()
    assert "KV f16" in out.err and "KV q8_0" in out.err  # progress, one line per type
    lines = out.out.splitlines()
    assert "KV cache types" in lines[0] and "vs f16" in lines[0]
    assert lines[1].split()[0] == "KV" and "KL mean" in lines[1]
    assert lines[2].split()[0] == "f16" and "ref" in lines[2]
    assert lines[3].split()[0] == "q8_0"
    assert f"saved to {out_file}" in out.out

    data = json.loads(out_file.read_text())
    assert data["kind"] == "kv" and data["n_tokens"] == 96 and data["prompt_tokens"] == 24
    ref, q8 = data["rows"]
    assert [r["label"] for r in data["rows"]] == ["KV f16", "KV q8_0"]
    assert [r["quant"] for r in data["rows"]] == ["f16", "q8_0"]
    assert ref["path"] == q8["path"] and ref["file_size"] == q8["file_size"]  # one model file
    assert ref["reference"] and ref["kl_mean"] is None and ref["kl_p99"] is None and ref["top1_agree"] is None
    assert not q8["reference"]
    assert math.isfinite(q8["kl_mean"]) and 0 <= q8["kl_mean"] < 0.5
    assert math.isfinite(q8["kl_p99"]) and q8["kl_p99"] >= q8["kl_mean"]
    assert 0.5 < q8["top1_agree"] <= 1.0
    for r in data["rows"]:
        assert math.isfinite(r["perplexity"]) and 1.0 < r["perplexity"] < 1000.0
        assert r["prefill_tok_s"] > 0 and r["decode_tok_s"] > 0 and r["load_s"] > 0
    # The app's saved ladder (the quant levels) is not touched by a KV ladder.
    assert not (edge_home / "ladders").exists()


def test_unknown_kv_type_is_a_one_line_error_naming_the_flag(edge_home, capsys):
    assert cli.main(["ladder", "smollm2", "--kv-types", "f16,q3_x"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "--kv-types" in err and "'q3_x'" in err and "q8_0" in err
    assert "Traceback" not in err


def test_parse_kv_types():
    assert parse_kv_types("F16, q8_0,q8_0,,q4_0") == ["f16", "q8_0", "q4_0"]
    assert parse_kv_types(["q4_0", "f16"]) == ["q4_0", "f16"]  # order kept: the first is the reference
    with pytest.raises(EdgeInferError, match="--kv-types"):
        parse_kv_types(" , ")
