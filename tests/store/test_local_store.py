"""`list`, `rm` and `import` through the CLI, as a user runs them."""

from __future__ import annotations

import io
import json

from edge_infer import cli
from edge_infer.store.store import ModelStore


def test_import_validates_then_copies_with_sha256(edge_home, tiny_gguf, capsys):
    assert cli.main(["import", str(tiny_gguf), "--quant", "F32"]) == 0
    out = capsys.readouterr().out
    assert "imported tiny:F32" in out
    [m] = ModelStore().installed()
    assert m.source == "import" and m.path.read_bytes() == tiny_gguf.read_bytes()
    assert tiny_gguf.exists()  # copied, not moved
    import hashlib

    assert m.sha256 == hashlib.sha256(tiny_gguf.read_bytes()).hexdigest()
    # The same name again is refused, with what to do.
    assert cli.main(["import", str(tiny_gguf), "--quant", "F32"]) == 2
    assert "already installed" in capsys.readouterr().err


def test_import_refuses_broken_files_and_installs_nothing(edge_home, tiny_gguf, tmp_path, capsys):
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(tiny_gguf.read_bytes()[:-100])
    assert cli.main(["import", str(cut)]) == 2
    assert "truncated" in capsys.readouterr().err
    text = tmp_path / "notes.gguf"
    text.write_text("hello")
    assert cli.main(["import", str(text)]) == 2
    assert "not a GGUF file" in capsys.readouterr().err
    assert ModelStore().installed() == []
    assert not list((edge_home / "models").rglob("*.gguf")) if (edge_home / "models").exists() else True


def test_import_split_model_takes_every_shard(edge_home, smol_split, capsys):
    assert cli.main(["import", str(smol_split[0])]) == 0
    [m] = ModelStore().installed()
    assert m.quant == "Q4_1" and m.name == "SmolLM2-135M-Instruct" and len(m.parts) == 2
    assert all((m.path.parent / p.name).read_bytes() == p.read_bytes() for p in smol_split)
    # The second shard alone is not a model.
    assert cli.main(["import", str(smol_split[1]), "--name", "x"]) == 2
    assert "pass the first shard" in capsys.readouterr().err


def test_list_shows_name_quant_size_source_and_verdict(edge_home, tiny_gguf, capsys):
    assert cli.main(["list"]) == 0
    assert "no models installed" in capsys.readouterr().out
    cli.main(["import", str(tiny_gguf), "--quant", "F32"])
    capsys.readouterr()
    assert cli.main(["list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["NAME", "QUANT", "SIZE", "SOURCE", "FITS"]
    assert lines[1].split()[:2] == ["tiny", "F32"] and "import" in lines[1] and lines[1].endswith("fits")
    assert cli.main(["list", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["models"][0]["label"] == "tiny:F32" and data["models"][0]["fit"]["ram"] == "fits"


def test_rm_asks_unless_yes(edge_home, tiny_gguf, capsys, monkeypatch):
    cli.main(["import", str(tiny_gguf), "--quant", "F32"])
    capsys.readouterr()
    # Not a terminal and no --yes: refuse.
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    assert cli.main(["rm", "tiny"]) == 2
    assert "pass --yes" in capsys.readouterr().err and len(ModelStore().installed()) == 1

    class Tty(io.StringIO):
        def isatty(self):
            return True

    monkeypatch.setattr("sys.stdin", Tty("n\n"))
    assert cli.main(["rm", "tiny:F32"]) == 0
    assert "kept tiny:F32" in capsys.readouterr().out and len(ModelStore().installed()) == 1
    monkeypatch.setattr("sys.stdin", Tty("y\n"))
    assert cli.main(["rm", "tiny:F32"]) == 0
    assert "deleted tiny:F32" in capsys.readouterr().out
    assert ModelStore().installed() == [] and not (edge_home / "models" / "tiny-f32").exists()


def test_rm_needs_an_unambiguous_name(edge_home, tiny_gguf, capsys):
    cli.main(["import", str(tiny_gguf), "--quant", "F32"])
    cli.main(["import", str(tiny_gguf), "--quant", "F16"])
    capsys.readouterr()
    assert cli.main(["rm", "tiny", "--yes"]) == 2
    assert "names 2 installed models" in capsys.readouterr().err
    assert cli.main(["rm", "nope", "--yes"]) == 2
    assert "no installed model is called 'nope'" in capsys.readouterr().err
    assert cli.main(["rm", "tiny:F16", "--yes"]) == 0
    assert [m.label for m in ModelStore().installed()] == ["tiny:F32"]


def test_a_manifest_pointing_outside_its_folder_is_ignored(edge_home, tiny_gguf, tmp_path, capsys):
    assert cli.main(["import", str(tiny_gguf), "--quant", "F32"]) == 0
    [m] = ModelStore().installed()
    manifest = m.path.parent / "manifest.json"
    data = json.loads(manifest.read_text())
    outside = tmp_path / "secret.gguf"
    outside.write_bytes(tiny_gguf.read_bytes())
    data["file"] = "../../../" + str(outside.relative_to(outside.anchor))
    manifest.write_text(json.dumps(data))
    assert ModelStore().installed() == []

