"""Read a GGUF header (metadata + tensor table) and prove the file is whole.

Why not gguf.GGUFReader: it builds a numpy view per array element, so the
tokenizer arrays alone take 4 s (SmolLM2) to 16 s (Gemma 3, 262k tokens) on a
small machine, and a truncated file fails inside it with an opaque reshape
error. This reader walks the same format (spec: ggml/docs/gguf.md) with
`struct` over an mmap, skips large arrays by length, and never touches tensor
data. Type tables (value types, quant block sizes) still come from `gguf`.

It is also the gate in front of llama.cpp's parser: every count, length, dimension, type
and offset is checked against gguf.limits as it is read (cursor.Cursor), so a hostile file
is refused with one line (GGUFLimitError) before llama.cpp, `inspect` or the planner use it.
"""

from __future__ import annotations

import mmap
import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gguf.constants import GGUF_DEFAULT_ALIGNMENT, GGMLQuantizationType, GGUFValueType

from edge_infer.errors import ModelFileError
from edge_infer.gguf.cursor import Cursor, ShortRead, SkippedArray, value_type
from edge_infer.gguf.limits import (GGUFLimitError, check_alignment, check_counts, check_key, check_layout,
                                    check_n_dims, check_tensor_name, shown, tensor_sizes)

__all__ = ["GGUFHeader", "GGUFLimitError", "NeedMoreBytes", "SkippedArray", "TensorInfo",
           "parse_header_prefix", "read_header"]

MAGIC = b"GGUF"
SUPPORTED_VERSIONS = (2, 3)


@dataclass(frozen=True)
class TensorInfo:
    name: str
    shape: tuple[int, ...]   # GGUF order: innermost dimension first
    type: GGMLQuantizationType
    offset: int              # relative to the start of the data section
    n_elements: int
    n_bytes: int


@dataclass(frozen=True)
class GGUFHeader:
    version: int
    fields: dict[str, Any]
    tensors: tuple[TensorInfo, ...]
    data_offset: int         # absolute file offset of the tensor data section
    file_size: int

    @property
    def required_size(self) -> int:
        """Bytes the file must have to hold every tensor it declares."""
        return self.data_offset + max((t.offset + t.n_bytes for t in self.tensors), default=0)


def _tensor_info(cur: Cursor, index: int, seen: set[str]) -> TensorInfo:
    name = cur.string(f"tensor {index} name")
    check_tensor_name(name, index, seen)
    seen.add(name)
    n_dims = cur.unpack("I")
    check_n_dims(name, n_dims)
    shape = tuple(cur.unpack("Q") for _ in range(n_dims))
    ttype, n_elements, n_bytes = tensor_sizes(name, shape, cur.unpack("I"))
    offset = cur.unpack("Q")
    return TensorInfo(name, shape, ttype, offset, n_elements, n_bytes)


def _parse(cur: Cursor, file_size: int) -> GGUFHeader:
    """Walk the header, refusing (GGUFLimitError) whatever breaks a limit; ShortRead when
    the bytes end first. Offsets are checked against each other here, against the file's
    size by the caller that has the whole file."""
    cur.pos = 4
    version = cur.unpack("I")
    if version & 0xFFFF == 0 and version:  # 3 read little-endian from a big-endian file
        raise ValueError("big-endian GGUF files are not supported")
    if version not in SUPPORTED_VERSIONS:
        raise ValueError(f"GGUF version {version} is not supported (expected 2 or 3)")
    n_tensors, n_kv = cur.unpack("QQ")
    check_counts(n_tensors, n_kv, file_size)
    fields: dict[str, Any] = {}
    alignment = GGUF_DEFAULT_ALIGNMENT
    for i in range(n_kv):
        key = cur.string(f"key {i}")
        check_key(key, i, fields)
        field = f"key {shown(key)}"
        vtype = value_type(cur.unpack("I"), field)
        fields[key] = cur.value(vtype, field)
        if key == "general.alignment":
            alignment = check_alignment(fields[key], vtype == GGUFValueType.UINT32)
    seen: set[str] = set()
    tensors = tuple(_tensor_info(cur, i, seen) for i in range(n_tensors))
    check_layout(tensors, alignment)
    # llama.cpp pads to the data section only when there is one (vocab-only files end unpadded).
    data_offset = -(-cur.pos // alignment) * alignment if tensors else cur.pos
    return GGUFHeader(version, fields, tensors, data_offset, file_size)


def read_header(path: str | os.PathLike) -> GGUFHeader:
    """Parse and validate; every failure is a ModelFileError that names the file."""
    path = Path(path)
    if not path.exists():
        raise ModelFileError(f"no such model file: {path}")
    if path.is_dir():
        raise ModelFileError(f"{path} is a directory, not a GGUF model file")
    file_size = path.stat().st_size
    if file_size == 0:
        raise ModelFileError(f"{path} is empty (0 bytes), not a GGUF model file")
    with open(path, "rb") as fh:
        head = fh.read(8)
        if head[:4] != MAGIC:
            raise ModelFileError(f"{path} is not a GGUF file (starts with {head!r})")
        if file_size < 24:
            raise ModelFileError(f"{path} is truncated: {file_size} bytes is too short for a GGUF header")
        with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as buf:
            try:
                header = _parse(Cursor(buf, file_size), file_size)
            except GGUFLimitError as exc:
                raise exc.at(str(path)) from None
            except ShortRead:
                raise ModelFileError(
                    f"{path} is truncated: its GGUF header runs past the end of the file "
                    f"(file has {file_size} bytes)"
                ) from None
            except (ValueError, KeyError, struct.error, OverflowError, MemoryError) as exc:
                raise ModelFileError(f"{path} has an unreadable GGUF header: {exc}") from None
    if header.required_size > file_size:
        raise ModelFileError(
            f"{path} is truncated: expected at least {header.required_size} bytes, "
            f"file has {file_size} (an interrupted download? fetch it again)"
        )
    return header


class NeedMoreBytes(Exception):
    """The bytes given end inside the GGUF header: read a longer prefix of the file."""


def parse_header_prefix(buf: bytes, file_size: int, source: str = "remote file") -> GGUFHeader:
    """Parse the header from the first len(buf) bytes of a file of `file_size` bytes (an
    HTTP range read). Raises NeedMoreBytes when the header goes on past `buf`, and
    ModelFileError when the bytes are not a GGUF header at all (GGUFLimitError when it breaks
    a limit). Tensor offsets are not checked against file_size here: the weights are not
    read, and the download's own check (read_header on the whole file) comes later."""
    if len(buf) < 24:
        if len(buf) >= file_size:
            raise ModelFileError(f"{source} is too short ({file_size} bytes) to be a GGUF file")
        raise NeedMoreBytes()
    if bytes(buf[:4]) != MAGIC:
        raise ModelFileError(f"{source} is not a GGUF file (starts with {bytes(buf[:8])!r})")
    try:
        return _parse(Cursor(buf, len(buf)), file_size)
    except GGUFLimitError as exc:
        raise exc.at(source) from None
    except ShortRead:
        if len(buf) >= file_size:
            raise ModelFileError(f"{source} is truncated: its GGUF header runs past the end of the file") from None
        raise NeedMoreBytes() from None
    except (ValueError, KeyError, struct.error, OverflowError, MemoryError) as exc:
        raise ModelFileError(f"{source} has an unreadable GGUF header: {exc}") from None
