"""Whether a GPU plug-in is worth loading here, decided from device files before any driver.

Loading ggml's Vulkan plug-in makes the Vulkan loader open every installed driver (Mesa's
lvp, radeon, intel ...) and map libLLVM: seconds and tens of MiB in every process, even on
a machine without a GPU, where the one device found is llvmpipe, a CPU-type device that
llama.cpp skips unless GGML_VK_VISIBLE_DEVICES names it. On Linux a GPU the kernel drives
has a device file under /dev, so its absence says, without loading a driver, that the
plug-in would find nothing llama.cpp uses. Elsewhere (macOS, Windows) every plug-in loads,
as before: no file says so cheaply there.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Collection, Mapping
from pathlib import Path

VK_VISIBLE = "GGML_VK_VISIBLE_DEVICES"

# Device files (relative to /dev) through which each backend's driver reaches a GPU.
# Render nodes: Mesa, AMD, Intel, and NVIDIA with nvidia-drm; nvidiaN: NVIDIA's own driver
# (containers often pass only these); dxg: WSL2's GPU; kgsl/mali: Android's GPUs; kfd: ROCm.
_GPU_FILES = {
    "vulkan": ("dri/renderD*", "nvidia[0-9]*", "dxg", "kgsl-3d*", "mali[0-9]*"),
    "cuda": ("nvidia[0-9]*", "dxg"),
    "hip": ("kfd",),
}
_PATTERNS = tuple(sorted({p for ps in _GPU_FILES.values() for p in ps}))


def plugin_backend(path: Path | str) -> str:
    """'libggml-vulkan.so' -> 'vulkan'."""
    stem = Path(path).name.split(".")[0]
    return stem.split("ggml-", 1)[-1]


def gpu_device_files(dev: Path = Path("/dev")) -> frozenset[str]:
    """The GPU device files present, relative to `dev` ('dri/renderD128', 'nvidia0')."""
    found = set()
    for pattern in _PATTERNS:
        found.update(str(p.relative_to(dev)) for p in dev.glob(pattern))
    return frozenset(found)


def plugin_wanted(backend: str, platform: str, env: Mapping[str, str],
                  device_files: Collection[str]) -> tuple[bool, str]:
    """(load it?, why): the decision for one GPU plug-in, from the platform (sys.platform),
    the environment and the GPU device files present (gpu_device_files)."""
    if not platform.startswith("linux") or backend not in _GPU_FILES:
        return True, "no device file to check first"
    if backend == "vulkan" and env.get(VK_VISIBLE, "").strip():
        return True, f"{VK_VISIBLE} names its devices"
    patterns = _GPU_FILES[backend]
    present = sorted(f for f in device_files if any(fnmatch.fnmatch(f, p) for p in patterns))
    if present:
        return True, "GPU device file " + ", ".join(f"/dev/{f}" for f in present)
    why = f"no GPU device file ({', '.join('/dev/' + p for p in patterns)})"
    if backend == "vulkan":
        why += f": a software Vulkan device (llvmpipe) is used only where {VK_VISIBLE} names it"
    return False, why
