"""Read a GGUF header (metadata + tensor table) and prove the file is whole.

Why not gguf.GGUFReader: it builds a numpy view per array element, so the
tokenizer arrays alone take 4 s (SmolLM2) to 16 s (Gemma 3, 262k tokens) on a
small machine, and a truncated file fails inside it with an opaque reshape
error. This reader walks the same format (spec: ggml/docs/gguf.md) with
`struct` over an mmap, skips large arrays by length, and never touches tensor
data. Type tables (value types, quant block sizes) still come from `gguf`.
"""

from __future__ import annotations

import mmap
import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gguf.constants import GGML_QUANT_SIZES, GGUF_DEFAULT_ALIGNMENT, GGMLQuantizationType, GGUFValueType

from edge_infer.errors import ModelFileError

MAGIC = b"GGUF"
SUPPORTED_VERSIONS = (2, 3)
# Arrays longer than these are recorded by length only (tokenizer vocab, merges, scores).
MAX_DECODED_ARRAY = 4096
MAX_DECODED_STRINGS = 64

_SCALAR_FORMATS = {
    GGUFValueType.UINT8: "B", GGUFValueType.INT8: "b",
    GGUFValueType.UINT16: "H", GGUFValueType.INT16: "h",
    GGUFValueType.UINT32: "I", GGUFValueType.INT32: "i",
    GGUFValueType.UINT64: "Q", GGUFValueType.INT64: "q",
    GGUFValueType.FLOAT32: "f", GGUFValueType.FLOAT64: "d",
    GGUFValueType.BOOL: "?",
}


@dataclass(frozen=True)
class SkippedArray:
    """A metadata array too long to be worth decoding; only its shape is kept."""

    item_type: str
    count: int

    def __len__(self) -> int:
        return self.count


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


class _ShortRead(Exception):
    """The header claims more bytes than the file has."""


class _Cursor:
    def __init__(self, buf: mmap.mmap, size: int):
        self.buf, self.size, self.pos = buf, size, 0

    def _need(self, n: int) -> None:
        if n < 0 or self.pos + n > self.size:
            raise _ShortRead()

    def unpack(self, fmt: str) -> Any:
        n = struct.calcsize("<" + fmt)
        self._need(n)
        values = struct.unpack_from("<" + fmt, self.buf, self.pos)
        self.pos += n
        return values if len(values) > 1 else values[0]

    def string(self) -> str:
        n = self.unpack("Q")
        self._need(n)
        raw = self.buf[self.pos:self.pos + n]
        self.pos += n
        return raw.decode("utf-8", errors="replace")

    def skip_string(self) -> None:
        n = self.unpack("Q")
        self._need(n)
        self.pos += n

    def value(self, vtype: int) -> Any:
        vtype = GGUFValueType(vtype)
        if vtype == GGUFValueType.STRING:
            return self.string()
        if vtype == GGUFValueType.ARRAY:
            return self.array()
        return self.unpack(_SCALAR_FORMATS[vtype])

    def array(self) -> Any:
        itype, count = GGUFValueType(self.unpack("I")), self.unpack("Q")
        if itype in _SCALAR_FORMATS:
            fmt = _SCALAR_FORMATS[itype]
            if count > MAX_DECODED_ARRAY:
                self._advance(count, fmt)
                return SkippedArray(itype.name, count)
            return tuple(struct.unpack_from(f"<{count}{fmt}", self.buf, self._advance(count, fmt)))
        if itype == GGUFValueType.STRING and count > MAX_DECODED_STRINGS:
            for _ in range(count):
                self.skip_string()
            return SkippedArray(itype.name, count)
        return tuple(self.value(itype) for _ in range(count))

    def _advance(self, count: int, fmt: str) -> int:
        n = count * struct.calcsize(fmt)
        self._need(n)
        start, self.pos = self.pos, self.pos + n
        return start


def _tensor_info(cur: _Cursor) -> TensorInfo:
    name = cur.string()
    n_dims = cur.unpack("I")
    if n_dims > 8:
        raise ValueError(f"tensor {name!r} claims {n_dims} dimensions")
    shape = tuple(cur.unpack("Q") for _ in range(n_dims))
    raw_type = cur.unpack("I")
    try:
        ttype = GGMLQuantizationType(raw_type)
    except ValueError:
        raise ValueError(f"tensor {name!r} has unknown type id {raw_type} (file from a newer llama.cpp?)") from None
    offset = cur.unpack("Q")
    n_elements = 1
    for d in shape:
        n_elements *= d
    block, type_size = GGML_QUANT_SIZES[ttype]
    return TensorInfo(name, shape, ttype, offset, n_elements, n_elements * type_size // block)


def _parse(cur: _Cursor, file_size: int) -> GGUFHeader:
    cur.pos = 4
    version = cur.unpack("I")
    if version & 0xFFFF == 0 and version:  # 3 read little-endian from a big-endian file
        raise ValueError("big-endian GGUF files are not supported")
    if version not in SUPPORTED_VERSIONS:
        raise ValueError(f"GGUF version {version} is not supported (expected 2 or 3)")
    n_tensors, n_kv = cur.unpack("QQ")
    if n_tensors > file_size or n_kv > file_size:  # each entry takes at least one byte
        raise ValueError(f"header claims {n_tensors} tensors and {n_kv} keys")
    fields: dict[str, Any] = {}
    for _ in range(n_kv):
        key = cur.string()
        fields[key] = cur.value(cur.unpack("I"))
    tensors = tuple(_tensor_info(cur) for _ in range(n_tensors))
    alignment = fields.get("general.alignment", GGUF_DEFAULT_ALIGNMENT)
    if not isinstance(alignment, int) or alignment <= 0 or alignment & (alignment - 1):
        raise ValueError(f"invalid general.alignment {alignment!r}")
    data_offset = -(-cur.pos // alignment) * alignment
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
                header = _parse(_Cursor(buf, file_size), file_size)
            except _ShortRead:
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
    ModelFileError when the bytes are not a GGUF header at all."""
    if len(buf) < 24:
        if len(buf) >= file_size:
            raise ModelFileError(f"{source} is too short ({file_size} bytes) to be a GGUF file")
        raise NeedMoreBytes()
    if bytes(buf[:4]) != MAGIC:
        raise ModelFileError(f"{source} is not a GGUF file (starts with {bytes(buf[:8])!r})")
    try:
        return _parse(_Cursor(buf, len(buf)), file_size)
    except _ShortRead:
        if len(buf) >= file_size:
            raise ModelFileError(f"{source} is truncated: its GGUF header runs past the end of the file") from None
        raise NeedMoreBytes() from None
    except (ValueError, KeyError, struct.error, OverflowError, MemoryError) as exc:
        raise ModelFileError(f"{source} has an unreadable GGUF header: {exc}") from None
