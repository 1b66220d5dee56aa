"""`inspect` and `provision` through edge_infer.cli.main, as a user runs them."""

import json

from edge_infer import cli
from edge_infer.units import MiB


def test_inspect_json(smollm2_path, capsys):
    assert cli.main(["inspect", str(smollm2_path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    model, memory = out["model"], out["memory"]
    assert model["architecture"] == "llama" and model["quantization"] == "Q4_1"
    assert model["block_count"] == 30 and model["context_length"] == 8192
    assert memory["ctx"] == 4096 and memory["parallel"] == 1
    assert memory["kv_bytes"] == 90 * MiB
    assert memory["total_bytes"] >= memory["weights_bytes"] + memory["kv_bytes"]


def test_inspect_table(gemma3_path, capsys):
    assert cli.main(["inspect", str(gemma3_path), "--ctx", "2048", "--parallel", "4"]) == 0
    out = capsys.readouterr().out
    for text in ("gemma3", "268.1M", "Q4_K_M", "241.4 MiB", "32768 tokens", "18",
                 "512 tokens on 15 of 18 layers", "chat template    no", "2048 tokens x 4 sequences", "total"):
        assert text in out, text


def test_inspect_bad_file_exits_2_without_traceback(tmp_path, capsys):
    bad = tmp_path / "readme.gguf"
    bad.write_text("# not a model\n")
    assert cli.main(["inspect", str(bad)]) == 2
    captured = capsys.readouterr()
    assert "is not a GGUF file" in captured.err and "Traceback" not in captured.err
    assert captured.out == ""


def test_inspect_not_installed_says_how_to_get_it(edge_home, capsys):
    assert cli.main(["inspect", "gemma3"]) == 2
    assert "edge-infer provision gemma3" in capsys.readouterr().err


def test_provision_then_already_installed(edge_home, tiny_mirror, capsys):
    assert cli.main(["provision"]) == 0  # no alias: the catalog default
    first = capsys.readouterr().out
    assert "installed tiny:F32" in first and str(edge_home / "models" / "tiny") in first
    assert cli.main(["provision", "--all"]) == 0
    second = capsys.readouterr().out
    assert "already installed" in second and "downloading" not in second
    assert cli.main(["inspect", "tiny", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["model"]["name"] == "Tiny Test Model"


def test_provision_unknown_alias(edge_home, tiny_mirror, capsys):
    assert cli.main(["provision", "nope"]) == 2
    assert "not in the model catalog" in capsys.readouterr().err
