"""Hostile GGUF headers for tests/gguf/test_hostile_gguf.py: raw struct packing of crafted
files, mutations of real headers at their field positions, and one judge that runs the
reader on a case and says what it made of it (parsed, or a one-line refusal).

Layout (ggml/docs/gguf.md): b"GGUF", u32 version, u64 tensor count, u64 key count; keys (u64
length + bytes, u32 type, value); tensor infos (name, u32 n_dims, u64 dims, u32 type, u64
offset); padding to general.alignment; tensor data.
"""

from __future__ import annotations

import struct
import time
import tracemalloc
from dataclasses import dataclass
from pathlib import Path

from edge_infer.errors import ModelFileError
from edge_infer.gguf.header import NeedMoreBytes, parse_header_prefix, read_header
from edge_infer.gguf.info import info_from_header
from edge_infer.gguf.limits import GGUFLimitError

U8, I32, U32, F32, U64, STRING, ARRAY = 0, 5, 4, 6, 10, 8, 9
T_F32, T_Q4_0 = 0, 2


def s(text: str | bytes) -> bytes:
    raw = text.encode() if isinstance(text, str) else text
    return struct.pack("<Q", len(raw)) + raw


def kv(key: str, vtype: int, payload: bytes) -> bytes:
    return s(key) + struct.pack("<I", vtype) + payload


def kv_u32(key: str, value: int) -> bytes:
    return kv(key, U32, struct.pack("<I", value))


def kv_str(key: str, value: str) -> bytes:
    return kv(key, STRING, s(value))


def tensor(name: str, dims: tuple[int, ...], ttype: int = T_F32, offset: int = 0, n_dims: int | None = None) -> bytes:
    n = len(dims) if n_dims is None else n_dims
    return s(name) + struct.pack("<I", n) + b"".join(struct.pack("<Q", d) for d in dims) + struct.pack("<IQ", ttype, offset)


def craft(kvs: list[bytes], tensors: list[bytes], *, n_kv: int | None = None, n_tensors: int | None = None,
          data: int = 0, version: int = 3, align: int = 32) -> bytes:
    """A GGUF file from packed keys and tensor infos; `data` zero bytes of tensor data after
    the header padded to `align`."""
    head = b"GGUF" + struct.pack("<IQQ", version, len(tensors) if n_tensors is None else n_tensors,
                                 len(kvs) if n_kv is None else n_kv)
    body = head + b"".join(kvs) + b"".join(tensors)
    pad = -len(body) % align
    return body + b"\0" * (pad + data)


def base_kvs(n_layer: int = 1) -> list[bytes]:
    return [kv_str("general.architecture", "llama"), kv_u32("llama.block_count", n_layer),
            kv_u32("llama.context_length", 256), kv_u32("llama.embedding_length", 8)]


def good_file() -> bytes:
    """Two F32 tensors of 8 and 8x8 elements, laid out as llama.cpp wants them."""
    return craft(base_kvs(), [tensor("output_norm.weight", (8,), offset=0),
                              tensor("blk.0.attn_q.weight", (8, 8), offset=32)], data=32 + 256)


@dataclass
class Verdict:
    ok: bool
    message: str          # the refusal, "" when it parsed
    limit: bool           # a GGUFLimitError (a named field), not a plain ModelFileError
    seconds: float
    peak_bytes: int


def judge(data: bytes, path: Path, *, size: int | None = None, trace: bool = False) -> Verdict:
    """Write `data` (grown to `size` with a sparse tail: the weights are never read) and read it
    as every command does: header, then ModelInfo. Anything but a parse or a ModelFileError
    raises out of here (a crash)."""
    path.write_bytes(data)
    if size is not None and size > len(data):
        with open(path, "r+b") as fh:
            fh.truncate(size)
    if trace:
        tracemalloc.start()
    t0 = time.perf_counter()
    try:
        info_from_header(path, read_header(path))
        ok, message, limit = True, "", False
    except ModelFileError as exc:
        ok, message, limit = False, str(exc), isinstance(exc, GGUFLimitError)
    finally:
        seconds = time.perf_counter() - t0
        peak = tracemalloc.get_traced_memory()[1] if trace else 0
        if trace:
            tracemalloc.stop()
    return Verdict(ok, message, limit, seconds, peak)


def judge_prefix(data: bytes, file_size: int) -> str:
    """The hub's path: the header from a prefix of the file. 'parsed', 'more' (read a longer
    prefix) or the refusal."""
    try:
        parse_header_prefix(memoryview(data), file_size, "hub/x.gguf")
        return "parsed"
    except NeedMoreBytes:
        return "more"
    except ModelFileError as exc:
        return str(exc)


# ---- mutations of a real header at its field positions ------------------------------------
EXTREMES_U64 = (0, 1, 2**31, 2**32 - 1, 2**32, 2**62, 2**63 - 1, 2**63, 2**64 - 1)
EXTREMES_U32 = (0, 1, 5, 9, 13, 43, 2**31, 2**32 - 1)


def patch(data: bytes, at: int, fmt: str, value: int) -> bytes:
    b = bytearray(data)
    struct.pack_into(fmt, b, at, value)
    return bytes(b)


def field_mutations(layout, full: bool = False) -> dict[str, bytes]:
    """name -> mutated header: counts, key lengths, value types, string lengths, array item
    types and counts, n_dims, dims, tensor types and offsets, set to extreme values. The
    default set takes a few values per field (seconds); `full` every value at more fields."""
    from tests.hardening.corrupt_gguf import T_ARRAY, T_STRING

    def pick(values: tuple, few: tuple) -> tuple:
        return values if full else few

    d, out = layout.data, {}
    for v in pick((0, 1, 4, 2**16, 2**32 - 1), (0, 4)):
        out[f"version={v}"] = patch(d, 4, "<I", v)
    for v in pick(EXTREMES_U64, (2**32, 2**63, 2**64 - 1)):
        out[f"tensor_count={v}"] = patch(d, 8, "<Q", v)
        out[f"kv_count={v}"] = patch(d, 16, "<Q", v)
    arrays = [k for k in layout.kvs if k.type == T_ARRAY]
    kvs = layout.kvs[:6] + arrays[:3] if full else layout.kvs[:2] + arrays[:1]
    for k in kvs:
        for v in pick((0, 2**24 + 1, 2**63, 2**64 - 1), (2**24 + 1, 2**64 - 1)):
            out[f"{k.key}.key_len={v}"] = patch(d, k.at, "<Q", v)
        for v in pick(EXTREMES_U32, (9, 13, 2**32 - 1)):
            out[f"{k.key}.type={v}"] = patch(d, k.value_at - 4, "<I", v)
        if k.type == T_STRING:
            for v in pick((2**24 + 1, 2**63, 2**64 - 1, len(d)), (2**64 - 1, len(d))):
                out[f"{k.key}.str_len={v}"] = patch(d, k.value_at, "<Q", v)
        if k.type == T_ARRAY:
            for v in pick((T_ARRAY, 13, 2**32 - 1), (T_ARRAY, 13)):
                out[f"{k.key}.item_type={v}"] = patch(d, k.value_at, "<I", v)
            for v in pick((2**26 + 1, 2**63, 2**64 - 1, len(d)), (2**26 + 1, 2**64 - 1)):
                out[f"{k.key}.count={v}"] = patch(d, k.value_at + 4, "<Q", v)
    for i in (0, 1, len(layout.tensors) // 2, -1) if full else (0, -1):
        t = layout.tensors[i]
        for v in pick((0, 5, 99, 2**32 - 1), (5, 2**32 - 1)):
            out[f"{t.name}.n_dims={v}"] = patch(d, t.n_dims_at, "<I", v)
        for v in pick((0, 3) + EXTREMES_U64[2:], (3, 2**63, 2**64 - 1)):
            out[f"{t.name}.dims[0]={v}"] = patch(d, t.dims_at, "<Q", v)
        for v in pick((4, 31, 43, 2**32 - 1), (4, 43)):
            out[f"{t.name}.type={v}"] = patch(d, t.offset_at - 4, "<I", v)
        for v in pick((1, 31, 2**40) + EXTREMES_U64[5:], (31, 2**64 - 1)):
            out[f"{t.name}.offset={v}"] = patch(d, t.offset_at, "<Q", v)
    return out
