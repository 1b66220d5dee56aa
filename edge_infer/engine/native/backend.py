"""Loading ggml's backends before the first model, and reporting what is in use.

A portable llama.cpp (GGML_BACKEND_DL) links no CPU backend in: someone must load one
(llama-cpp-python does not bind ggml_backend_load_all, its issue #2069, and a model load
then says "no backends are loaded"). We load the CPU variant that engine/native/cpu.py chose,
plus any GPU backend library of the build, through ctypes on the same libggml that
libllama uses. Then we read the CPU device's extra buffer types, the input to the
AMX decision. Process-wide and once: backends cannot be unloaded under a live model.
GPU plug-ins load only when a caller needs devices (load_gpu_plugins), and only where a
device file says a GPU could be found (engine/native/gpu_probe.py): a Vulkan plug-in loads a
driver stack (Mesa, LLVM) that costs seconds in every process.
"""

from __future__ import annotations

import ctypes
import logging
import os
import sys
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path

from edge_infer.engine.native import cpu, gpu_probe
from edge_infer.errors import EdgeInferError

log = logging.getLogger("edge_infer.backend")

# GPU backend libraries a GGML_BACKEND_DL build may carry next to the CPU variants.
_GPU_BACKENDS = ("cuda", "hip", "metal", "vulkan", "sycl", "opencl", "musa", "blas")


def gpu_plugins(directory: Path) -> list[Path]:
    """GPU backend libraries installed beside the CPU variants (packaging/gpu_plugin.py)."""
    return [path for name in _GPU_BACKENDS for path in sorted(directory.glob(f"*ggml-{name}.*"))]


def rpc_plugin(directory: Path) -> Path | None:
    """llama.cpp's RPC backend library (`make rpc`): workers as devices, and the worker itself."""
    return next(iter(sorted(directory.glob("*ggml-rpc.*"))), None)


@dataclass
class BackendInfo:
    """What this process runs llama.cpp on; shown by inspect, the Stats tab and /v1/props."""
    cpu_model: str
    cpu_flags: list[str]            # the ISA flags that matter to ggml (not the whole list)
    variant: str                    # CPU backend variant loaded, or "built-in"
    variants_available: list[str]
    extra_bufts_offered: list[str]  # e.g. ["AMX", "CPU_REPACK"]
    use_extra_bufts: bool
    extra_bufts_reason: str
    devices: list[str] = field(default_factory=list)   # ggml devices, e.g. ["CPU", "CUDA0"]
    lib_dir: str = ""
    gpu_plugins: list[str] = field(default_factory=list)  # GPU backend libraries beside the CPU variants
    gpu_plugins_skipped: dict[str, str] = field(default_factory=dict)  # library -> why it was not loaded
    gpus_probed: bool = False       # load_gpu_plugins has run (a CPU-only process never runs it)

    def as_dict(self) -> dict:
        return asdict(self)

    def summary(self) -> str:
        bufts = ", ".join(self.extra_bufts_offered) or "none"
        state = "on" if self.use_extra_bufts else "off"
        return f"CPU variant {self.variant}; extra buffer types ({bufts}) {state}"


class GgmlInitParams(ctypes.Structure):  # struct ggml_init_params, passed by value
    _fields_ = [("mem_size", ctypes.c_size_t), ("mem_buffer", ctypes.c_void_p), ("no_alloc", ctypes.c_bool)]


def lib_dir() -> Path:
    """Where llama_cpp loaded libllama from (its package lib/, LLAMA_CPP_LIB_PATH, or the
    PyInstaller bundle's copy of the package)."""
    import llama_cpp.llama_cpp as bindings
    return Path(bindings._base_path)


def _loaded_ggml(directory: Path) -> Path:
    """The libggml file libllama already loaded. Wheels hold copies, not links, of
    libggml.so / .so.0: opening another copy would give a second, empty backend registry."""
    maps = Path("/proc/self/maps")
    if maps.exists():
        for line in maps.read_text().splitlines():
            path = line.split()[-1]
            if Path(path).name.startswith("libggml.so"):
                return Path(path)
    for name in ("libggml.so.0", "libggml.so", "libggml.0.dylib", "libggml.dylib", "ggml.dll"):
        if (directory / name).exists():
            return directory / name
    raise EdgeInferError(f"no libggml in {directory}: is llama-cpp-python installed whole?")


def _ggml(directory: Path) -> ctypes.CDLL:
    import llama_cpp  # noqa: F401  (loads libllama, and with it libggml)

    path = _loaded_ggml(directory)
    lib = ctypes.CDLL(str(path), mode=getattr(ctypes, "RTLD_GLOBAL", 0))
    vp, cp = ctypes.c_void_p, ctypes.c_char_p
    for name, res, args in (
        ("ggml_backend_load", vp, [cp]),
        ("ggml_backend_dev_count", ctypes.c_size_t, []),
        ("ggml_backend_dev_get", vp, [ctypes.c_size_t]),
        ("ggml_backend_dev_name", cp, [vp]),
        ("ggml_backend_dev_description", cp, [vp]),
        ("ggml_backend_dev_memory", None, [vp, ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(ctypes.c_size_t)]),
        ("ggml_backend_reg_name", cp, [vp]),
        ("ggml_backend_dev_supports_op", ctypes.c_bool, [vp, vp]),
        ("ggml_init", vp, [GgmlInitParams]),
        ("ggml_free", None, [vp]),
        ("ggml_new_tensor_1d", vp, [vp, ctypes.c_int, ctypes.c_int64]),
        ("ggml_add", vp, [vp, vp, vp]),
        ("ggml_backend_dev_type", ctypes.c_int, [vp]),
        ("ggml_backend_dev_backend_reg", vp, [vp]),
        ("ggml_backend_reg_get_proc_address", vp, [vp, cp]),
        ("ggml_backend_buft_name", cp, [vp]),
        ("ggml_backend_reg_by_name", vp, [cp]),
        ("ggml_backend_register", None, [vp]),
        ("ggml_backend_dev_by_name", vp, [cp]),
    ):
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = res, args
    return lib


_DEV_TYPE_CPU = 0


def ggml_library() -> ctypes.CDLL:
    """The libggml libllama loaded, with the registry functions bound (after init_backend)."""
    global _ggml_lib
    if _ggml_lib is None:
        _ggml_lib = _ggml(lib_dir())
    return _ggml_lib


_ggml_lib: ctypes.CDLL | None = None


def _extra_bufts(ggml: ctypes.CDLL) -> tuple[list[str], list[str]]:
    """(device names, extra buffer type names of the CPU device)."""
    devices, offered = [], []
    for i in range(ggml.ggml_backend_dev_count()):
        dev = ggml.ggml_backend_dev_get(i)
        devices.append(ggml.ggml_backend_dev_name(dev).decode())
        if ggml.ggml_backend_dev_type(dev) != _DEV_TYPE_CPU or offered:
            continue
        reg = ggml.ggml_backend_dev_backend_reg(dev)
        fn_ptr = ggml.ggml_backend_reg_get_proc_address(reg, b"ggml_backend_dev_get_extra_bufts")
        if not fn_ptr:
            continue
        get = ctypes.CFUNCTYPE(ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p)(fn_ptr)
        arr = get(dev)
        j = 0
        while arr and arr[j]:
            offered.append(ggml.ggml_backend_buft_name(arr[j]).decode())
            j += 1
    return devices, offered


def load_backends(variant_request: str, extra_setting: str, features: cpu.CpuFeatures | None = None) -> BackendInfo:
    """Load the chosen CPU variant (and the RPC backend) of a portable build; decide extra
    buffer types. Raises EdgeInferError (one line) for a bad setting or a missing variant.
    GPU plug-ins are load_gpu_plugins' job."""
    features = features or cpu.read_cpu_features()
    directory = lib_dir()
    variants = cpu.variants_in(directory)
    candidates = cpu.variant_candidates(features, list(variants), variant_request)
    extra_setting = cpu.parse_extra_bufts(extra_setting)   # a bad value fails before loading
    ggml = _ggml(directory)
    variant = candidates[0]
    if variants:
        # ggml refuses (NULL) a variant whose CPUID check fails: take the next one down.
        variant = next((v for v in candidates if ggml.ggml_backend_load(str(variants[v]).encode())), None)
        if variant is None:
            tried = ", ".join(candidates)
            raise EdgeInferError(f"llama.cpp refused every CPU backend tried ({tried}): "
                                 "this CPU lacks what they need")
        if (rpc := rpc_plugin(directory)) is not None and not ggml.ggml_backend_load(str(rpc).encode()):
            log.warning("llama.cpp could not load %s", rpc.name)
    devices, offered = _extra_bufts(ggml)
    use, reason = cpu.decide_extra_bufts(features, offered, extra_setting)
    interesting = sorted(f for f in features.flags if f.startswith(("avx", "amx", "fma", "f16c", "sse4", "bmi2", "asimd", "sve", "i8mm")))
    return BackendInfo(cpu_model=features.model, cpu_flags=interesting, variant=variant,
                       variants_available=sorted(variants, key=cpu.variant_rank), extra_bufts_offered=offered,
                       use_extra_bufts=use, extra_bufts_reason=reason, devices=devices,
                       lib_dir=str(directory), gpu_plugins=[p.name for p in gpu_plugins(directory)])


def load_gpu_plugins(info: BackendInfo, env: Mapping[str, str] | None = None,
                     device_files: frozenset[str] | None = None) -> None:
    """Load the GPU plug-ins beside the CPU variants that this machine could use (gpu_probe);
    record the others in info.gpu_plugins_skipped, and the devices now registered."""
    env = os.environ if env is None else env
    files = gpu_probe.gpu_device_files() if device_files is None else device_files
    ggml = ggml_library()
    portable = bool(info.variants_available)  # a build with its CPU backend built in has no plug-ins
    for path in gpu_plugins(Path(info.lib_dir)) if portable else ():
        wanted, why = gpu_probe.plugin_wanted(gpu_probe.plugin_backend(path), sys.platform, env, files)
        if not wanted:
            info.gpu_plugins_skipped[path.name] = why
            log.info("not loading %s: %s", path.name, why)
        # A plug-in whose driver or runtime is missing is refused (NULL): the CPU still runs.
        elif ggml.ggml_backend_load(str(path).encode()):
            log.info("loaded ggml backend %s (%s)", path.name, why)
        else:
            log.warning("llama.cpp could not load %s (is its driver or runtime installed?)", path.name)
    info.devices = _extra_bufts(ggml)[0]
    info.gpus_probed = True
