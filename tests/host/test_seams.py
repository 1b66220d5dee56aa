"""The host's default seams that need no engine."""

from __future__ import annotations

from edge_infer.host.seams import model_identity
from edge_infer.store.store import ModelStore


def test_a_store_model_is_known_by_its_manifest_sha256_and_a_loose_file_by_nothing(tmp_path):
    folder = tmp_path / "models" / "tiny-q8_0"
    folder.mkdir(parents=True)
    model = folder / "tiny.gguf"
    model.write_bytes(b"GGUF" + bytes(60))
    assert model_identity(model) is None  # no manifest yet: the engine falls back to size and time
    ModelStore(tmp_path / "models").record(model, name="tiny", quant="Q8_0", source="import", sha256="ab" * 32)
    assert model_identity(model) == "ab" * 32
    other = folder / "other.gguf"  # beside it, but not the file its manifest names
    other.write_bytes(b"GGUF")
    assert model_identity(other) is None
