"""KV cache element types (--cache-type-k / --cache-type-v): the choices, their ggml type
ids and bytes per element (the memory plan needs the sizes; engine passes the ids)."""

from __future__ import annotations

from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

from edge_infer.errors import EdgeInferError

# Only the types checked on this build; more (q4_1, q5_0, q5_1, iq4_nl) untested so far.
KV_TYPES = ("f16", "bf16", "q8_0", "q4_0")
DEFAULT_KV_TYPE = "f16"
_UNQUANTIZED = ("f32", "f16", "bf16")


def ggml_type(name: str) -> int:
    return int(GGMLQuantizationType[name.upper()])


def type_bytes(name: str) -> float:
    """Bytes per element: type size / block size (q8_0: 34 / 32)."""
    block, size = GGML_QUANT_SIZES[GGMLQuantizationType[name.upper()]]
    return size / block


def check_kv_types(k: str, v: str, flash_attn: str) -> None:
    """Raise EdgeInferError (one line) for an unknown type or a quantized V cache with
    flash attention off (llama.cpp needs flash attention for it)."""
    for flag, name in (("--cache-type-k", k), ("--cache-type-v", v)):
        if name not in KV_TYPES:
            raise EdgeInferError(f"{flag} {name!r}: unknown KV cache type (choose from {', '.join(KV_TYPES)})")
    if v not in _UNQUANTIZED and flash_attn == "off":
        raise EdgeInferError(f"--cache-type-v {v} needs flash attention: drop --flash-attn off")
