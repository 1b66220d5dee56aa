"""Whether the llama.cpp build can offload: a portable build registers its GPU backend only
when the engine loads it, so the plan looks for the backend library beside libllama."""

import llama_cpp.llama_cpp as bindings

from edge_infer.plan.machine import GpuDevice, _llama_can_offload, detect_machine


def test_a_portable_gpu_build_is_seen_before_its_backend_loads(tmp_path, monkeypatch):
    monkeypatch.setattr(bindings, "_base_path", tmp_path)
    (tmp_path / "libggml-cpu-haswell.so").write_bytes(b"")
    assert not _llama_can_offload(), "CPU variants alone cannot offload"
    (tmp_path / "libggml-cuda.so").write_bytes(b"")
    assert _llama_can_offload()


def test_offload_needs_both_a_gpu_and_a_gpu_build():
    gpu = (GpuDevice("NVIDIA H200", 141 << 30, 140 << 30),)
    assert detect_machine(gpu_query=lambda: gpu, can_offload=lambda: True).gpu_offload
    cpu_build = detect_machine(gpu_query=lambda: gpu, can_offload=lambda: False)
    assert not cpu_build.gpu_offload and "rebuild with CUDA" in cpu_build.describe()
    assert not detect_machine(gpu_query=lambda: (), can_offload=lambda: True).gpu_offload
