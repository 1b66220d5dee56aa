"""CPU features -> which ggml CPU backend variant to load and whether extra buffer types
(AMX tiles, repacked weights) are safe. Pure functions of their inputs: the tests fake
the feature set, since the test machine may have no AMX or no AVX-512.

A portable build (GGML_BACKEND_DL + GGML_CPU_ALL_VARIANTS) ships one CPU backend library
per ISA level (libggml-cpu-haswell.so, ...); ggml would pick the highest-scoring one
itself, we pick it here so the choice can be shown, overridden and tested.
"""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass, field
from pathlib import Path

from edge_infer.errors import EdgeInferError

CPU_VARIANT_ENV = "EDGE_INFER_CPU_VARIANT"
EXTRA_BUFTS_ENV = "EDGE_INFER_EXTRA_BUFTS"
EXTRA_BUFTS_CHOICES = ("auto", "on", "off")

# ggml's AVX512 means all five of these (ggml-cpu/arch/x86/cpu-feats.cpp).
_AVX512 = {"avx512f", "avx512cd", "avx512vl", "avx512dq", "avx512bw"}
_HASWELL = {"sse4_2", "avx", "f16c", "fma", "avx2", "bmi2"}
_ICELAKE = _HASWELL | _AVX512 | {"avx512vbmi", "avx512_vnni"}
# What each x86 variant of GGML_CPU_ALL_VARIANTS needs, as /proc/cpuinfo spells the flags
# (ggml/src/CMakeLists.txt, the ggml_add_cpu_backend_variant list).
X86_VARIANTS: dict[str, frozenset[str]] = {
    "x64": frozenset(),
    "sse42": frozenset({"sse4_2"}),
    "sandybridge": frozenset({"sse4_2", "avx"}),
    "ivybridge": frozenset({"sse4_2", "avx", "f16c"}),
    "piledriver": frozenset({"sse4_2", "avx", "f16c", "fma"}),
    "haswell": frozenset(_HASWELL),
    "skylakex": frozenset(_HASWELL | _AVX512),
    "cannonlake": frozenset(_HASWELL | _AVX512 | {"avx512vbmi"}),
    "cascadelake": frozenset(_HASWELL | _AVX512 | {"avx512_vnni"}),
    "icelake": frozenset(_ICELAKE),
    "cooperlake": frozenset(_HASWELL | _AVX512 | {"avx512_vnni", "avx512_bf16"}),
    "zen4": frozenset(_ICELAKE | {"avx512_bf16"}),
    "alderlake": frozenset(_HASWELL | {"avx_vnni"}),
    "sapphirerapids": frozenset(_ICELAKE | {"avx512_bf16", "amx_tile", "amx_int8"}),
}
BUILT_IN = "built-in"   # a build without GGML_BACKEND_DL: one CPU backend linked in


@dataclass(frozen=True)
class CpuFeatures:
    arch: str                                  # platform.machine(): x86_64, arm64, aarch64
    flags: frozenset[str] = field(default_factory=frozenset)
    model: str = ""

    @property
    def has_amx(self) -> bool:
        return "amx_int8" in self.flags or "amx_tile" in self.flags


def read_cpu_features(cpuinfo: Path = Path("/proc/cpuinfo")) -> CpuFeatures:
    """The running CPU's flags (Linux /proc/cpuinfo; elsewhere the architecture only)."""
    arch = platform.machine().lower()
    flags: set[str] = set()
    model = platform.processor()
    try:
        for line in cpuinfo.read_text(errors="replace").splitlines():
            key, _, value = line.partition(":")
            key = key.strip()
            if key in ("flags", "Features") and not flags:
                flags = set(value.split())
            elif key == "model name" and value.strip():
                model = value.strip()
            if flags and model and key == "":
                break   # first processor block read
    except OSError:
        pass
    return CpuFeatures(arch=arch, flags=frozenset(flags), model=model)


def variant_supported(variant: str, features: CpuFeatures) -> bool:
    needs = X86_VARIANTS.get(variant)
    return needs is not None and needs <= features.flags


def variant_candidates(features: CpuFeatures, available: list[str], requested: str = "auto") -> list[str]:
    """Variants to try in order, best first. The flags come from /proc/cpuinfo, which an
    emulator or a VM may report for the host rather than the CPU it presents, so the
    loader tries the next one when ggml's own CPUID check refuses a variant."""
    requested = (requested or "auto").strip().lower()
    if not available:   # not a GGML_BACKEND_DL build: nothing to choose
        if requested not in ("auto", BUILT_IN):
            raise EdgeInferError(f"this llama.cpp build has one built-in CPU backend; "
                                 f"it cannot load the {requested!r} variant")
        return [BUILT_IN]
    if requested != "auto":
        if requested not in available:
            raise EdgeInferError(f"unknown CPU variant {requested!r}; this build has: "
                                 + ", ".join(sorted(available, key=variant_rank)))
        if requested in X86_VARIANTS and not variant_supported(requested, features):
            missing = sorted(X86_VARIANTS[requested] - features.flags)
            raise EdgeInferError(f"this CPU cannot run the {requested!r} variant "
                                 f"(it lacks {', '.join(missing)})")
        return [requested]
    runnable = [v for v in available if v not in X86_VARIANTS or variant_supported(v, features)]
    if not runnable:
        raise EdgeInferError("no CPU backend variant of this build runs on this CPU "
                             f"(build has: {', '.join(sorted(available))})")
    return sorted(runnable, key=variant_rank, reverse=True)


def variant_rank(variant: str) -> tuple[int, str]:
    # More required features = more capable; non-x86 names (arm) sort by name.
    return (len(X86_VARIANTS.get(variant, ())), variant)


def parse_extra_bufts(setting: str | None) -> str:
    """auto | on | off, or a one-line error naming the environment variable."""
    setting = (setting or "auto").strip().lower()
    if setting not in EXTRA_BUFTS_CHOICES:
        raise EdgeInferError(f"{EXTRA_BUFTS_ENV} must be one of {', '.join(EXTRA_BUFTS_CHOICES)}, "
                             f"not {setting!r}")
    return setting


def decide_extra_bufts(features: CpuFeatures, offered: list[str], setting: str = "auto") -> tuple[bool, str]:
    """(use extra buffer types, why). `offered` is what the loaded CPU backend offers
    (buffer type names such as "AMX", "CPU_REPACK"). ggml's AMX matmul segfaults on
    multi-token batches (llama.cpp issues on AMX + segfault), and llama.cpp can only turn
    extra buffer types off all together, so on an AMX CPU whose build offers AMX they are
    off unless the user says on."""
    setting = parse_extra_bufts(setting)
    if setting == "on":
        return True, "forced on"
    if setting == "off":
        return False, "forced off"
    if "AMX" in offered and features.has_amx:
        return False, "off: AMX tiles crash llama.cpp on multi-token batches"
    return True, "on" if offered else "on (none offered)"


def settings_from_env(env: dict[str, str] | None = None) -> tuple[str, str]:
    """(variant request, extra-buffer setting) from the environment; validated later."""
    env = os.environ if env is None else env
    return env.get(CPU_VARIANT_ENV, "auto") or "auto", env.get(EXTRA_BUFTS_ENV, "auto") or "auto"


def variants_in(lib_dir: Path) -> dict[str, Path]:
    """CPU backend libraries of a GGML_BACKEND_DL build: libggml-cpu-<variant>.so/.dylib/.dll."""
    found: dict[str, Path] = {}
    for path in sorted(lib_dir.glob("*ggml-cpu-*")):
        name = path.name
        for ext in (".so", ".dylib", ".dll"):
            if name.endswith(ext):
                variant = name[:-len(ext)].split("ggml-cpu-", 1)[1]
                found[variant] = path
    return found
