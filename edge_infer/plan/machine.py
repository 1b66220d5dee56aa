"""This machine's memory: RAM, GPUs and whether the llama.cpp build can offload.

Seams (ollama's sched.go style): detect_machine() reads this machine, but every decision
in plan.fit takes a Machine, so tests and `--ram`-style overrides hand in any machine.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from edge_infer.units import GiB, MiB


@dataclass(frozen=True)
class GpuDevice:
    name: str
    total_bytes: int
    free_bytes: int


@dataclass(frozen=True)
class Machine:
    ram_total: int
    ram_available: int
    gpus: tuple[GpuDevice, ...] = ()
    gpu_offload: bool = False   # the llama.cpp build can offload layers (a GPU build)

    @property
    def gpu_free(self) -> int:
        return sum(g.free_bytes for g in self.gpus)

    def describe(self) -> str:
        parts = [f"{self.ram_available / GiB:.1f} of {self.ram_total / GiB:.1f} GiB RAM available"]
        for g in self.gpus:
            parts.append(f"{g.name}: {g.free_bytes / GiB:.1f} of {g.total_bytes / GiB:.1f} GiB free")
        if self.gpus and not self.gpu_offload:
            parts.append("(this llama.cpp build is CPU-only: rebuild with CUDA to use the GPU)")
        if not self.gpus:
            parts.append("no GPU")
        return ", ".join(parts)


def query_nvidia_gpus(timeout: float = 5.0) -> tuple[GpuDevice, ...]:
    """GPUs nvidia-smi reports, or () when there is none (or no driver)."""
    import shutil
    import subprocess

    exe = shutil.which("nvidia-smi")
    if not exe:
        return ()
    try:
        out = subprocess.run([exe, "--query-gpu=name,memory.total,memory.free",
                              "--format=csv,noheader,nounits"], capture_output=True, text=True,
                             timeout=timeout, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return ()
    return parse_nvidia_smi(out)


def parse_nvidia_smi(text: str) -> tuple[GpuDevice, ...]:
    gpus = []
    for line in text.strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 3:
            continue
        try:
            gpus.append(GpuDevice(parts[0], int(float(parts[1]) * MiB), int(float(parts[2]) * MiB)))
        except ValueError:
            continue
    return tuple(gpus)


# GPU backend libraries a portable (GGML_BACKEND_DL) build may carry beside libllama.
_OFFLOAD_BACKENDS = ("cuda", "hip", "vulkan", "sycl", "musa", "metal")


def _llama_can_offload() -> bool:
    try:
        import llama_cpp
        import llama_cpp.llama_cpp as bindings

        if llama_cpp.llama_supports_gpu_offload():  # a GPU backend linked in, or already loaded
            return True
        # A portable build registers its GPU backend only once the engine loads it
        # (engine/backend.py); asked before that, llama.cpp says "no offload" on a GPU build.
        lib = Path(bindings._base_path)
        return any(any(lib.glob(f"*ggml-{name}.*")) for name in _OFFLOAD_BACKENDS)
    except Exception:  # no llama_cpp at all: nothing can be offloaded
        return False


def detect_machine(gpu_query=query_nvidia_gpus, can_offload=_llama_can_offload) -> Machine:
    import psutil

    vm = psutil.virtual_memory()
    gpus = gpu_query()
    return Machine(ram_total=vm.total, ram_available=vm.available, gpus=gpus,
                   gpu_offload=bool(gpus) and can_offload())
