"""Hard limits on what a GGUF header may declare, checked before anything is allocated by
a count read from the file and before llama.cpp's own parser sees the file.

The limits follow Ollama's #17062 and llama.cpp's gguf.cpp (ggml/src/gguf.cpp, gguf_init_from_file_impl):
at most GGML_MAX_DIMS dimensions, no negative dimension (0 is allowed, as there), element
counts and byte sizes within int64, a known tensor type whose block divides the row, tensors
laid out one after the other at aligned offsets, an alignment that is a power of two given
as a u32, no empty or repeated key, no repeated tensor name, names shorter than GGML_MAX_NAME.
Ours on top: strings of at most 16 MiB and arrays of at most 64 Mi elements (Ollama's), and
no more keys or tensors than the bytes left in the file could hold.
"""

from __future__ import annotations

from typing import Any

from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

from edge_infer.errors import ModelFileError

INT64_MAX = (1 << 63) - 1
GGML_MAX_DIMS = 4            # ggml.h
GGML_MAX_NAME = 64           # ggml.h: a tensor name must be shorter
LLAMA_MAX_LAYERS = 512       # llama-hparams.h: per-layer arrays are this long
MAX_STRING_BYTES = 16 << 20  # keys, values and tensor names (Ollama #17062)
MAX_ARRAY_ITEMS = 64 << 20   # elements of one metadata array (Ollama #17062)
MAX_KEYS = 1 << 16           # real files have about fifty
MAX_TENSORS = 1 << 18        # real files have a few thousand at most
# The fewest bytes one entry can take in the file, so a count can be checked against the
# bytes that remain: a key is u64 length + >= 1 byte + u32 type + >= 1 byte of value; a
# tensor info is u64 length + u32 n_dims + u32 type + u64 offset (an empty name, no dims).
MIN_KV_BYTES = 8 + 1 + 4 + 1
MIN_TENSOR_BYTES = 8 + 4 + 4 + 8
HEADER_BYTES = 24            # magic, version, tensor count, key count


def shown(name: str) -> str:
    """A key or tensor name as an error line quotes it: repr'd (no raw control bytes) and short."""
    text = repr(name)
    return text if len(text) <= 60 else text[:56] + "…" + text[0]


class GGUFLimitError(ModelFileError):
    """A GGUF header that breaks a limit: refused before llama.cpp parses the file. One
    line naming the field (`tensor_count`, `key 'general.name'`, `tensor 'x' dims[1]`, ...)."""

    def __init__(self, field: str, detail: str, source: str = ""):
        self.field, self.detail, self.source = field, detail, source
        where = f"{source}: " if source else ""
        super().__init__(f"{where}refused: GGUF {field}: {detail} (checked before llama.cpp reads the file)")

    def at(self, source: str) -> GGUFLimitError:
        """The same refusal, naming the file."""
        return GGUFLimitError(self.field, self.detail, source)


def check_counts(n_tensors: int, n_kv: int, file_size: int) -> None:
    """More keys or tensors than the file could hold, or than any real model has."""
    if n_kv > MAX_KEYS:
        raise GGUFLimitError("kv_count", f"{n_kv} keys is more than the limit of {MAX_KEYS}")
    if n_tensors > MAX_TENSORS:
        raise GGUFLimitError("tensor_count", f"{n_tensors} tensors is more than the limit of {MAX_TENSORS}")
    room = max(file_size - HEADER_BYTES, 0)
    if n_kv * MIN_KV_BYTES > room:
        raise GGUFLimitError("kv_count", f"{n_kv} keys cannot fit in a file of {file_size} bytes")
    if n_kv * MIN_KV_BYTES + n_tensors * MIN_TENSOR_BYTES > room:
        raise GGUFLimitError("tensor_count", f"{n_tensors} tensors (after {n_kv} keys) cannot fit "
                                             f"in a file of {file_size} bytes")


def check_key(key: str, index: int, seen: set[str] | dict) -> None:
    if not key:
        raise GGUFLimitError(f"key {index}", "the key is empty")
    if key in seen:
        raise GGUFLimitError(f"key {shown(key)}", "the key appears twice")


def check_tensor_name(name: str, index: int, seen: set[str]) -> None:
    if len(name.encode("utf-8", "surrogatepass")) >= GGML_MAX_NAME:
        raise GGUFLimitError(f"tensor {index} name", f"{len(name)} characters; names must be shorter "
                                                     f"than {GGML_MAX_NAME} bytes")
    if name in seen:
        raise GGUFLimitError(f"tensor {shown(name)}", "the name appears twice")


def check_n_dims(name: str, n_dims: int) -> None:
    if n_dims > GGML_MAX_DIMS:
        raise GGUFLimitError(f"tensor {shown(name)} n_dims", f"{n_dims} dimensions; at most {GGML_MAX_DIMS}")


def tensor_sizes(name: str, shape: tuple[int, ...], raw_type: int) -> tuple[GGMLQuantizationType, int, int]:
    """(type, element count, byte size) of a tensor, each checked as llama.cpp checks it."""
    for j, d in enumerate(shape):
        if d > INT64_MAX:  # read as u64; llama.cpp reads int64 and refuses a negative one
            raise GGUFLimitError(f"tensor {shown(name)} dims[{j}]", f"{d} is negative as an int64")
    n_elements = 1
    for d in shape:
        n_elements *= d
    if n_elements > INT64_MAX:
        raise GGUFLimitError(f"tensor {shown(name)} shape", f"{list(shape)} has more elements than an int64 counts")
    try:
        ttype = GGMLQuantizationType(raw_type)
        block, type_size = GGML_QUANT_SIZES[ttype]
    except (ValueError, KeyError):
        raise GGUFLimitError(f"tensor {shown(name)} type", f"unknown type id {raw_type} "
                                                      "(a file from a newer llama.cpp?)") from None
    if block <= 0 or type_size <= 0:
        raise GGUFLimitError(f"tensor {shown(name)} type", f"{ttype.name} has no usable block size")
    row = shape[0] if shape else 1
    if row % block:
        raise GGUFLimitError(f"tensor {shown(name)} dims[0]", f"{row} elements per row is not a multiple of "
                                                         f"{ttype.name}'s block of {block}")
    n_bytes = n_elements // block * type_size
    if n_bytes > INT64_MAX:
        raise GGUFLimitError(f"tensor {shown(name)} shape", f"{list(shape)} of {ttype.name} is more bytes "
                                                       "than an int64 counts")
    return ttype, n_elements, n_bytes


def check_alignment(value: Any, vtype_is_u32: bool) -> int:
    if not vtype_is_u32:
        raise GGUFLimitError("key 'general.alignment'", "must be a u32")
    if value <= 0 or value & (value - 1):
        raise GGUFLimitError("key 'general.alignment'", f"{value} is not a power of two")
    return value


def check_layout(tensors, alignment: int) -> None:
    """llama.cpp's rule: each tensor starts where the one before it ends, padded to the
    alignment (so offsets are aligned, never overlap, and sum within int64)."""
    expected = 0
    for t in tensors:
        if t.offset % alignment:
            raise GGUFLimitError(f"tensor {shown(t.name)} offset", f"{t.offset} is not a multiple of the "
                                                              f"alignment {alignment}")
        if t.offset != expected:
            raise GGUFLimitError(f"tensor {shown(t.name)} offset", f"{t.offset}; the tensor before it ends at "
                                                              f"{expected}")
        expected += -(-t.n_bytes // alignment) * alignment
        if expected > INT64_MAX:
            raise GGUFLimitError(f"tensor {shown(t.name)} offset", "the data section overflows an int64")


def meta_uint(fields: dict[str, Any], key: str, default: int = 0, top: int = (1 << 32) - 1) -> int:
    """A metadata number the planner uses: an integer in [0, top], else a refusal naming it."""
    value = fields.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise GGUFLimitError(f"key {shown(key)}", f"expected an integer, got {type(value).__name__}")
    if not 0 <= value <= top:
        raise GGUFLimitError(f"key {shown(key)}", f"{value} is outside 0..{top}")
    return value
