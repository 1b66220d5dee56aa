"""llama.cpp's backend devices: the one list of where a model can run.

After the backends are loaded (engine/llama.init_backend: the CPU variant and any GPU
plug-in beside it), ggml's registry holds one device per CPU, GPU, integrated GPU or RPC
worker, with the memory its backend reports. This list is what the plan, the fit verdicts,
`inspect`, `/props`, `/metrics`, the TUI and gpu_check.py use; no vendor tool is asked.
"""

from __future__ import annotations

import ctypes
import sys
from dataclasses import replace

from edge_infer.plan import machine as machines
from edge_infer.plan.machine import ACCEL, CPU, GPU, IGPU, REMOTE, Device, Machine

# enum ggml_backend_dev_type (ggml-backend.h)
_KINDS = {0: CPU, 1: GPU, 2: IGPU, 3: ACCEL}


def list_devices(gpus: bool = True) -> tuple[Device, ...]:
    """Every device llama.cpp has registered, in its order, with free and total memory now.
    gpus=False: those registered so far, without loading GPU plug-ins for this call."""
    from edge_infer.engine.native import backend
    from edge_infer.engine.native.llama import init_backend

    init_backend(gpus=gpus)
    ggml = backend.ggml_library()
    found = []
    for i in range(ggml.ggml_backend_dev_count()):
        dev = ggml.ggml_backend_dev_get(i)
        free, total = ctypes.c_size_t(0), ctypes.c_size_t(0)
        ggml.ggml_backend_dev_memory(dev, ctypes.byref(free), ctypes.byref(total))
        kind = _KINDS.get(ggml.ggml_backend_dev_type(dev), GPU)
        reg = ggml.ggml_backend_dev_backend_reg(dev)
        if reg and (ggml.ggml_backend_reg_name(reg) or b"").decode() == "RPC":
            kind = REMOTE
        name = (ggml.ggml_backend_dev_name(dev) or b"?").decode()
        found.append(Device(name=name, total_bytes=total.value, free_bytes=free.value, kind=kind,
                            description=(ggml.ggml_backend_dev_description(dev) or b"").decode().strip(),
                            max_tensor_bytes=_max_tensor(ggml, dev, name, kind, total.value)))
    return tuple(found)


_max_tensor_cache: dict[str, int] = {}
_GGML_TYPE_F32 = 0


def _max_tensor(ggml, dev, name: str, kind: str, total: int) -> int:
    """The largest tensor the device computes with, 0 = no limit below its memory: asked of the
    backend itself (ggml_backend_dev_supports_op on an unallocated F32 add, bisected). Vulkan
    refuses ops on tensors over maxStorageBufferRange (128 MiB on Mesa's llvmpipe), and then
    llama.cpp keeps such a weight, and its op, on the CPU."""
    from edge_infer.engine.native.backend import GgmlInitParams

    if kind == CPU or name in _max_tensor_cache:
        return _max_tensor_cache.get(name, 0)
    ctx = ggml.ggml_init(GgmlInitParams(64 * 1024, None, True))  # tensor headers only, no data

    def supported(nbytes: int) -> bool:
        a = ggml.ggml_new_tensor_1d(ctx, _GGML_TYPE_F32, nbytes // 4)
        return bool(ggml.ggml_backend_dev_supports_op(dev, ggml.ggml_add(ctx, a, a)))

    try:
        top = max(total, 1 << 30)
        if supported(top) or not supported(1 << 20):
            limit = 0
        else:  # bisect in MiB between 1 MiB (supported) and top (refused)
            lo, hi = 1, top >> 20
            while hi - lo > 1:
                mid = (lo + hi) // 2
                lo, hi = (mid, hi) if supported(mid << 20) else (lo, mid)
            limit = lo << 20
    finally:
        ggml.ggml_free(ctx)
    _max_tensor_cache[name] = limit
    return limit


def this_machine(workers: tuple[str, ...] = (), gpus: bool = True) -> Machine:
    """RAM and llama.cpp's devices now: the machine every plan of this process is made for;
    with `workers` (host:port), their devices too. A process that has not registered them
    (the server's: their model runs in a child, engine/child.py) asks them itself (rpc.probe).
    gpus=False (a CPU-only plan): GPU plug-ins not loaded yet stay unloaded."""
    machine = machines.detect_machine(lambda: list_devices(gpus))
    if not workers or any(d.kind == REMOTE for d in machine.gpus):
        return machine
    from edge_infer.engine.devices.rpc import worker_devices

    return replace(machine, gpus=worker_devices(workers) + machine.gpus, gpu_offload=True)


def missing_plugin_hint() -> str:
    """What to build when a GPU was asked for and none is loaded."""
    from edge_infer.engine.native.llama import init_backend

    info = init_backend()
    if info.gpu_plugins_skipped:  # engine/native/gpu_probe.py: no device file for it on this machine
        return "; ".join(f"{name} not loaded: {why}" for name, why in info.gpu_plugins_skipped.items())
    if info.gpu_plugins:
        return (f"llama.cpp loaded no GPU from {', '.join(info.gpu_plugins)}: check the GPU driver "
                "(a software Vulkan device also needs GGML_VK_VISIBLE_DEVICES=0)")
    gpu = "cuda" if sys.platform.startswith("linux") and _has_nvidia() else "vulkan"
    return f"this install has no GPU backend plug-in: `make gpu GPU={gpu}` builds one (see README, GPU offload)"


def _has_nvidia() -> bool:
    import shutil

    return bool(shutil.which("nvidia-smi"))
