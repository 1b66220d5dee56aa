"""llama.cpp's backend devices: the one list of where a model can run.

After the backends are loaded (engine/llama.init_backend: the CPU variant and any GPU
plug-in beside it), ggml's registry holds one device per CPU, GPU, integrated GPU or RPC
worker, with the memory its backend reports. This list is what the plan, the fit verdicts,
`inspect`, `/props`, `/metrics`, the TUI and gpu_check.py use; no vendor tool is asked.
"""

from __future__ import annotations

import ctypes
import sys

from edge_infer.plan import machine as machines
from edge_infer.plan.machine import ACCEL, CPU, GPU, IGPU, REMOTE, Device, Machine

# enum ggml_backend_dev_type (ggml-backend.h)
_KINDS = {0: CPU, 1: GPU, 2: IGPU, 3: ACCEL}


def list_devices() -> tuple[Device, ...]:
    """Every device llama.cpp has registered, in its order, with free and total memory now."""
    from edge_infer.engine import backend
    from edge_infer.engine.llama import init_backend

    init_backend()
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
        found.append(Device(name=(ggml.ggml_backend_dev_name(dev) or b"?").decode(),
                            total_bytes=total.value, free_bytes=free.value, kind=kind,
                            description=(ggml.ggml_backend_dev_description(dev) or b"").decode().strip()))
    return tuple(found)


def this_machine() -> Machine:
    """RAM and llama.cpp's devices now: the machine every plan of this process is made for."""
    return machines.detect_machine(list_devices)


def missing_plugin_hint() -> str:
    """What to build when a GPU was asked for and none is loaded."""
    from edge_infer.engine.llama import init_backend

    info = init_backend()
    if info.gpu_plugins:
        return (f"llama.cpp loaded no GPU from {', '.join(info.gpu_plugins)}: check the GPU driver "
                "(a software Vulkan device also needs GGML_VK_VISIBLE_DEVICES=0)")
    gpu = "cuda" if sys.platform.startswith("linux") and _has_nvidia() else "vulkan"
    return f"this install has no GPU backend plug-in: `make gpu GPU={gpu}` builds one (see README, GPU offload)"


def _has_nvidia() -> bool:
    import shutil

    return bool(shutil.which("nvidia-smi"))
