"""This machine's memory: RAM and the devices llama.cpp can place layers on.

The device list comes from llama.cpp's backend registry (engine/devices/devices.py reads it after
the backends are loaded): a CUDA, ROCm, Vulkan, Metal or SYCL GPU, an integrated GPU, later
a remote RPC worker, each with the free and total memory its backend reports. The plan
knows nothing of llama.cpp: every decision in plan.fit takes a Machine, so tests and the
commands hand in any machine (ollama's sched.go style seam). nvidia-smi is kept only as a
cross-check for gpu_check.py.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Iterable

from edge_infer.units import GiB, MiB

# Device kinds, as ggml_backend_dev_type names them (plus "remote" for an RPC worker).
CPU, GPU, IGPU, ACCEL, REMOTE = "cpu", "gpu", "igpu", "accel", "remote"


@dataclass(frozen=True)
class Device:
    """One llama.cpp backend device: `name` is llama.cpp's ("CUDA0", "Vulkan0", "Metal")."""
    name: str
    total_bytes: int
    free_bytes: int
    kind: str = GPU
    description: str = ""
    max_tensor_bytes: int = 0  # the largest tensor an op may use there (0 = no limit below memory)

    @property
    def shares_ram(self) -> bool:
        """An integrated GPU (Apple silicon, a laptop iGPU) holds its buffers in system RAM."""
        return self.kind == IGPU

    def label(self) -> str:
        return f"{self.name} ({self.description})" if self.description and self.description != self.name else self.name


GpuDevice = Device  # the name before devices came from llama.cpp


def offload_devices(devices: Iterable[Device]) -> tuple[Device, ...]:
    """The devices llama.cpp places layers on, in its order (src/llama.cpp, model devices):
    remote workers first, then discrete GPUs; integrated GPUs only when there is no discrete one."""
    devices = tuple(devices)
    remote = tuple(d for d in devices if d.kind == REMOTE)
    gpus = tuple(d for d in devices if d.kind == GPU)
    igpus = tuple(d for d in devices if d.kind == IGPU)
    return remote + (gpus or igpus)


@dataclass(frozen=True)
class Machine:
    ram_total: int
    ram_available: int
    gpus: tuple[Device, ...] = ()   # every non-CPU llama.cpp device (GPU, integrated GPU, remote)
    gpu_offload: bool = False        # a GPU backend is loaded: layers can be placed on `gpus`

    @property
    def devices(self) -> tuple[Device, ...]:
        """Where layers go, in llama.cpp's order; () when nothing can be offloaded."""
        return offload_devices(self.gpus) if self.gpu_offload else ()

    @property
    def gpu_free(self) -> int:
        return sum(d.free_bytes for d in self.devices)

    def capped(self, per_device: int | None) -> "Machine":
        """The same machine with at most `per_device` bytes free on each device (--gpu-memory)."""
        if not per_device:
            return self
        return replace(self, gpus=tuple(replace(d, free_bytes=min(d.free_bytes, per_device)) for d in self.gpus))

    def describe(self) -> str:
        parts = [f"{self.ram_available / GiB:.1f} of {self.ram_total / GiB:.1f} GiB RAM available"]
        for d in self.gpus:
            shared = ", shares RAM" if d.shares_ram else ""
            parts.append(f"{d.label()}: {d.free_bytes / GiB:.1f} of {d.total_bytes / GiB:.1f} GiB free{shared}")
        if self.gpus and not self.gpu_offload:
            parts.append("(no GPU backend is loaded: `make gpu GPU=vulkan` or GPU=cuda builds one)")
        if not self.gpus:
            parts.append("no GPU")
        return ", ".join(parts)


DeviceQuery = Callable[[], Iterable[Device]]


def detect_machine(devices: DeviceQuery | Iterable[Device] | None = None) -> Machine:
    """RAM from psutil; devices from `devices` (a tuple or a function returning one: the
    engine's list_devices, above this room). Without it, no device is known."""
    import psutil

    vm = psutil.virtual_memory()
    found = tuple(devices() if callable(devices) else devices or ())
    gpus = tuple(d for d in found if d.kind != CPU and d.kind != ACCEL)
    return Machine(ram_total=vm.total, ram_available=vm.available, gpus=gpus, gpu_offload=bool(gpus))


def query_nvidia_gpus(timeout: float = 5.0) -> tuple[Device, ...]:
    """GPUs nvidia-smi reports, or () when there is none (or no driver): a cross-check only."""
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


def parse_nvidia_smi(text: str) -> tuple[Device, ...]:
    gpus = []
    for line in text.strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 3:
            continue
        try:
            gpus.append(Device(parts[0], int(float(parts[1]) * MiB), int(float(parts[2]) * MiB)))
        except ValueError:
            continue
    return tuple(gpus)
