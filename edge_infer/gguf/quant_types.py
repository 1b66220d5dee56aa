"""Quantization levels: names, llama.cpp file types, approximate bits per weight, and
how to read a level from a file name (`Model-Q4_K_M.gguf`, `model.q8_0-00001-of-00003.gguf`).

Bits per weight are llama.cpp's figures for whole files (tools/quantize): a K-quant mix
keeps some tensors at higher precision, so Q4_K_M is ~4.9 bits, not 4.5. They order the
levels by precision; a file's real size is always taken from the file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class QuantType:
    name: str
    ftype: int | None    # llama_ftype for llama_model_quantize; None = cannot be a target
    bpw: float           # approximate bits per weight of a whole file
    quantized: bool = True


_TABLE = [
    # name       ftype  bpw
    ("F32",        0,   32.0, False),
    ("F16",        1,   16.0, False),
    ("BF16",      32,   16.0, False),
    ("Q8_0",       7,    8.50, True),
    ("Q6_K",      18,    6.56, True),
    ("Q5_1",       9,    6.00, True),
    ("Q5_K_M",    17,    5.69, True),
    ("Q5_K_S",    16,    5.54, True),
    ("Q5_0",       8,    5.50, True),
    ("Q4_1",       3,    5.00, True),
    ("Q4_K_M",    15,    4.85, True),
    ("Q4_K_S",    14,    4.58, True),
    ("IQ4_NL",    25,    4.50, True),
    ("Q4_0",       2,    4.50, True),
    ("IQ4_XS",    30,    4.25, True),
    ("Q3_K_L",    13,    4.27, True),
    ("Q3_K_M",    12,    3.91, True),
    ("IQ3_M",     27,    3.66, True),
    ("Q3_K_S",    11,    3.50, True),
    ("IQ3_S",     26,    3.44, True),
    ("Q2_K",      10,    3.35, True),
    ("IQ3_XS",    22,    3.30, True),
    ("IQ3_XXS",   23,    3.06, True),
    ("Q2_K_S",    21,    2.96, True),
    ("IQ2_M",     29,    2.70, True),
    ("IQ2_S",     28,    2.50, True),
    ("IQ2_XS",    20,    2.31, True),
    ("IQ2_XXS",   19,    2.06, True),
    ("TQ2_0",     37,    2.06, True),
    ("IQ1_M",     31,    1.75, True),
    ("TQ1_0",     36,    1.69, True),
    ("IQ1_S",     24,    1.56, True),
    ("MXFP4_MOE", 38,    4.25, True),
]
QUANT_TYPES: dict[str, QuantType] = {n: QuantType(n, f, b, q) for n, f, b, q in _TABLE}
# Names used for the same level in file names and headers.
ALIASES = {"Q4_K": "Q4_K_M", "Q5_K": "Q5_K_M", "Q3_K": "Q3_K_M", "FP16": "F16", "FP32": "F32",
           "MXFP4": "MXFP4_MOE"}
# iMatrix types need an importance matrix, which `edge-infer quantize` does not compute.
NEEDS_IMATRIX = {"IQ1_S", "IQ1_M", "IQ2_XXS", "IQ2_XS", "IQ2_S", "Q2_K_S"}

# Quant token in a file name: longest names first so Q4_K_M wins over Q4_K.
# Also levels published by uploaders (unsloth's *_XL, bartowski's *_L) and retired ARM repacks.
_EXTRA = ["Q4_0_4_4", "Q4_0_4_8", "Q4_0_8_8", "Q2_K_L", "Q3_K_XL", "Q4_K_L", "Q4_K_XL", "Q5_K_L",
          "Q5_K_XL", "Q6_K_L", "Q6_K_XL", "Q8_K_XL", "Q2_K_XL"]
_NAMES = sorted(set(QUANT_TYPES) | set(ALIASES) | set(_EXTRA), key=len, reverse=True)
_QUANT_RE = re.compile(r"(?<![A-Za-z0-9])(UD-)?(" + "|".join(re.escape(n) for n in _NAMES) + r")(?![A-Za-z0-9])",
                       re.IGNORECASE)
SPLIT_RE = re.compile(r"^(?P<stem>.+)-(?P<no>\d{5})-of-(?P<count>\d{5})\.gguf$", re.IGNORECASE)


def canonical(name: str) -> str:
    """Upper-case level name with aliases resolved (q4_k -> Q4_K_M, fp16 -> F16)."""
    up = name.strip().upper().replace("-", "_")
    return ALIASES.get(up, up)


def lookup(name: str) -> QuantType | None:
    return QUANT_TYPES.get(canonical(name))


def bits_per_weight(name: str) -> float:
    """Approximate bits per weight; unknown levels sort by the number in their name."""
    q = lookup(name)
    if q:
        return q.bpw
    m = re.search(r"(\d+)", name)
    return float(m.group(1)) if m else 0.0


def is_quantized(name: str) -> bool:
    q = lookup(name)
    return q.quantized if q else canonical(name) not in ("F32", "F16", "BF16")


def quant_from_filename(filename: str) -> str | None:
    """The quant level a file name states, upper-case as written (UD- prefixes kept)."""
    base = filename.rsplit("/", 1)[-1]
    m = SPLIT_RE.match(base)
    if m:
        base = m.group("stem") + ".gguf"
    found = None
    for m in _QUANT_RE.finditer(base):
        found = m  # the last token wins: "Llama-3-8B-Q4_K_M" has "8B" before it, never a level
    if not found:
        return None
    prefix = (found.group(1) or "").upper()
    return prefix + found.group(2).upper()


def split_info(filename: str) -> tuple[str, int, int] | None:
    """("model-Q4_K_M", 1, 3) for "model-Q4_K_M-00001-of-00003.gguf"; None if not split."""
    m = SPLIT_RE.match(filename.rsplit("/", 1)[-1])
    if not m:
        return None
    return m.group("stem"), int(m.group("no")), int(m.group("count"))


def model_stem(filename: str) -> str:
    """The file name without folder, split suffix, quant token and extension:
    "SmolLM2-135M-Instruct.Q4_1.gguf" -> "SmolLM2-135M-Instruct"."""
    base = filename.rsplit("/", 1)[-1]
    m = SPLIT_RE.match(base)
    base = m.group("stem") if m else re.sub(r"\.gguf$", "", base, flags=re.IGNORECASE)
    base = _QUANT_RE.sub("", base)
    return re.sub(r"[-_.]+$", "", re.sub(r"[-_.]{2,}", "-", base)) or base


def precision_key(name: str) -> tuple[float, str]:
    """Sort key: higher precision sorts later."""
    return bits_per_weight(name), canonical(name)
