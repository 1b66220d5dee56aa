"""Copies of real GGUF files with some metadata changed: a model whose chat template is
hostile, a vocabulary whose control tokens are another family's (Llama 3, Mistral) for
tokenizer tests that need no weights.

Byte surgery with struct (spec: ggml/docs/gguf.md) rather than gguf.GGUFReader, which takes
seconds to open SmolLM2 (a numpy view per vocabulary entry): keys and tensor records are
copied as they are, a changed value is written anew in its own type, tensor data follows
at the alignment the file asks for (tensor offsets are relative to it, so they still hold).
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
STRING, ARRAY = 8, 9


class _Reader:
    def __init__(self, data: bytes):
        self.data, self.at = data, 0

    def take(self, fmt: str):
        value = struct.unpack_from("<" + fmt, self.data, self.at)
        self.at += struct.calcsize("<" + fmt)
        return value[0] if len(value) == 1 else value

    def string(self) -> str:
        n = self.take("Q")
        self.at += n
        return self.data[self.at - n:self.at].decode("utf-8")

    def value(self, vtype: int) -> Any:
        if vtype == STRING:
            return self.string()
        if vtype == ARRAY:
            sub, n = self.take("I"), self.take("Q")
            return sub, [self.value(sub) for _ in range(n)]
        return self.take(SCALARS[vtype])


def _string(text: str) -> bytes:
    raw = text.encode("utf-8")
    return struct.pack("<Q", len(raw)) + raw


def _encode(vtype: int, value: Any, sub: int | None = None) -> bytes:
    if vtype == STRING:
        return _string(value)
    if vtype == ARRAY:
        return struct.pack("<IQ", sub, len(value)) + b"".join(_encode(sub, v) for v in value)
    return struct.pack("<" + SCALARS[vtype], value)


def read_values(source: Path, *names: str) -> dict[str, Any]:
    """The values of some keys (an array as a list)."""
    r = _Reader(Path(source).read_bytes())
    r.take("4sI")
    _, n_kv = r.take("QQ")
    out = {}
    for _ in range(n_kv):
        key, vtype = r.string(), r.take("I")
        value = r.value(vtype)
        if key in names:
            out[key] = value[1] if vtype == ARRAY else value
    return out


def copy_gguf(source: Path, dest: Path, changes: dict[str, Any] | None = None, *, tensors: bool = True) -> Path:
    """`source` with `changes` (key -> value: an existing key keeps its type, a new one is a
    string); tensors=False writes none (a vocabulary to load with vocab_only)."""
    changes = dict(changes or {})
    data = Path(source).read_bytes()
    r = _Reader(data)
    magic, version = r.take("4sI")
    n_tensors, n_kv = r.take("QQ")
    kv, alignment = [], 32
    for _ in range(n_kv):
        start = r.at
        key, vtype = r.string(), r.take("I")
        value = r.value(vtype)
        if key == "general.alignment":
            alignment = value
        if key in changes:
            sub = value[0] if vtype == ARRAY else None
            kv.append(_string(key) + struct.pack("<I", vtype) + _encode(vtype, changes.pop(key), sub))
        else:
            kv.append(data[start:r.at])
    kv += [_string(k) + struct.pack("<I", STRING) + _encode(STRING, v) for k, v in changes.items()]
    infos_start = r.at
    for _ in range(n_tensors):
        r.string()
        n_dims = r.take("I")
        r.at += 8 * n_dims + 4 + 8  # dims, type, offset
    infos = data[infos_start:r.at] if tensors else b""
    tensor_data = data[-(-r.at // alignment) * alignment:] if tensors else b""
    head = struct.pack("<4sIQQ", magic, version, n_tensors if tensors else 0, len(kv)) + b"".join(kv) + infos
    pad = b"\0" * ((-len(head)) % alignment) if tensors else b""
    Path(dest).write_bytes(head + pad + tensor_data)
    return Path(dest)
