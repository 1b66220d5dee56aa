"""A bounds-checked reader over the bytes of a GGUF header (an mmap of the file, or the
prefix a ranged HTTP read fetched).

Every length and count read from the file is checked against the limits (gguf.limits) and
against the bytes that remain before anything is allocated or skipped by it, so a hostile
header can neither make us allocate by its word nor read past the end. Bytes that run out
raise ShortRead: a truncated file, or for a prefix, "read more".
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from gguf.constants import GGUFValueType

from edge_infer.gguf.limits import MAX_ARRAY_ITEMS, MAX_STRING_BYTES, GGUFLimitError

# Arrays longer than these are recorded by length only (tokenizer vocab, merges, scores).
MAX_DECODED_ARRAY = 4096
MAX_DECODED_STRINGS = 64

SCALAR_FORMATS = {
    GGUFValueType.UINT8: "B", GGUFValueType.INT8: "b",
    GGUFValueType.UINT16: "H", GGUFValueType.INT16: "h",
    GGUFValueType.UINT32: "I", GGUFValueType.INT32: "i",
    GGUFValueType.UINT64: "Q", GGUFValueType.INT64: "q",
    GGUFValueType.FLOAT32: "f", GGUFValueType.FLOAT64: "d",
    GGUFValueType.BOOL: "?",
}
_SIZES = {t: struct.calcsize("<" + f) for t, f in SCALAR_FORMATS.items()}
_U64 = struct.Struct("<Q")


class ShortRead(Exception):
    """The header claims more bytes than the buffer has."""


@dataclass(frozen=True)
class SkippedArray:
    """A metadata array too long to be worth decoding; only its shape is kept."""

    item_type: str
    count: int

    def __len__(self) -> int:
        return self.count


def value_type(raw: int, field: str, *, in_array: bool = False) -> GGUFValueType:
    """A known GGUF value type; arrays of arrays are refused, as llama.cpp refuses them
    (and as nesting would let a small file recurse without end)."""
    try:
        vtype = GGUFValueType(raw)
    except ValueError:
        raise GGUFLimitError(field, f"unknown value type {raw}") from None
    if in_array and vtype == GGUFValueType.ARRAY:
        raise GGUFLimitError(field, "an array of arrays")
    return vtype


class Cursor:
    def __init__(self, buf, size: int):
        self.buf, self.size, self.pos = buf, size, 0

    @property
    def remaining(self) -> int:
        return self.size - self.pos

    def need(self, n: int) -> None:
        if n < 0 or n > self.remaining:
            raise ShortRead()

    def unpack(self, fmt: str) -> Any:
        n = struct.calcsize("<" + fmt)
        self.need(n)
        values = struct.unpack_from("<" + fmt, self.buf, self.pos)
        self.pos += n
        return values if len(values) > 1 else values[0]

    def _length(self, field: str) -> int:
        n = self.unpack("Q")
        if n > MAX_STRING_BYTES:
            raise GGUFLimitError(field, f"a string of {n} bytes; at most {MAX_STRING_BYTES}")
        self.need(n)
        return n

    def string(self, field: str) -> str:
        n = self._length(field)
        raw = bytes(self.buf[self.pos:self.pos + n])
        self.pos += n
        return raw.decode("utf-8", errors="replace")

    def skip_string(self, field: str) -> None:
        n = self._length(field)  # read first: `self.pos += ...` would load pos before it moves
        self.pos += n

    def value(self, vtype: GGUFValueType, field: str) -> Any:
        if vtype == GGUFValueType.STRING:
            return self.string(field)
        if vtype == GGUFValueType.ARRAY:
            return self.array(field)
        return self.unpack(SCALAR_FORMATS[vtype])

    def array(self, field: str) -> Any:
        itype = value_type(self.unpack("I"), field, in_array=True)
        count = self.unpack("Q")
        if count > MAX_ARRAY_ITEMS:
            raise GGUFLimitError(field, f"an array of {count} items; at most {MAX_ARRAY_ITEMS}")
        # Each item takes at least its size (a string at least its u64 length): a count the
        # remaining bytes cannot hold is a short file, found before looping or allocating.
        self.need(count * _SIZES.get(itype, 8))
        if itype in SCALAR_FORMATS:
            fmt = SCALAR_FORMATS[itype]
            start, self.pos = self.pos, self.pos + count * _SIZES[itype]
            if count > MAX_DECODED_ARRAY:
                return SkippedArray(itype.name, count)
            return tuple(struct.unpack_from(f"<{count}{fmt}", self.buf, start))
        if count > MAX_DECODED_STRINGS:
            self._skip_strings(count, field)
            return SkippedArray(itype.name, count)
        return tuple(self.string(field) for _ in range(count))

    def _skip_strings(self, count: int, field: str) -> None:
        """skip_string `count` times, inlined: a 262k-token vocabulary is walked on every
        `list`, every Models tab refresh and every load."""
        buf, pos, end, unpack = self.buf, self.pos, self.size, _U64.unpack_from
        for _ in range(count):
            if pos + 8 > end:
                raise ShortRead()
            (n,) = unpack(buf, pos)
            if n > MAX_STRING_BYTES:
                raise GGUFLimitError(field, f"a string of {n} bytes; at most {MAX_STRING_BYTES}")
            pos += 8 + n
        if pos > end:
            raise ShortRead()
        self.pos = pos
