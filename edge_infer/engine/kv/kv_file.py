"""The file format of one saved KV state (the disk tier, engine/kv/disk_tier.py).

    MAGIC | u32 header length | header (JSON) | tokens (u32 each) | llama.cpp's state bytes

The header holds the StateKey (what makes the bytes valid), the token count and checksums
(CRC-32) of the tokens and the state. read_state() checks everything before returning the
bytes: llama.cpp's own reader trusts them, and a bad state can crash the process.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
import zlib
from array import array
from dataclasses import asdict, dataclass
from pathlib import Path

MAGIC = b"EIKV\x01\n"
SUFFIX = ".kv"
_LEN = struct.Struct("<I")
MAX_HEADER = 1 << 20


class BadStateFile(Exception):
    """A saved state that must not be loaded: corrupt, truncated, or for something else."""


@dataclass(frozen=True)
class StateKey:
    """What must match for a saved state to be valid here."""
    model: str       # the model file's path (which file a stale state belonged to)
    model_id: str    # its identity: "sha256=..." from the store's manifest, else "size=... mtime_ns=..."
    layout: str      # KV types, flash attention (V layout), sliding-window mode, llama.cpp version

    def stale_for(self, current: "StateKey") -> bool:
        """Saved for the same model file when it held other weights (it was replaced). Only
        identities of one kind are compared: an engine opened outside the host (a benchmark)
        knows the file by size and mtime, and must not delete the host's sha256-keyed states."""
        return (self.model == current.model and self.model_id != current.model_id
                and _id_kind(self.model_id) == _id_kind(current.model_id))

    def digest(self) -> str:
        return hashlib.sha256(json.dumps(asdict(self), sort_keys=True).encode()).hexdigest()[:16]


def _id_kind(model_id: str) -> str:
    return model_id.split("=", 1)[0]


@dataclass(frozen=True)
class Header:
    key: StateKey
    n_tokens: int
    tokens_crc: int
    data_bytes: int
    data_crc: int


def file_name(key: StateKey, tokens: tuple[int, ...]) -> str:
    """One name per (key, tokens): two processes saving the same state write the same file."""
    return f"{key.digest()}-{hashlib.sha256(_token_bytes(tokens)).hexdigest()[:24]}{SUFFIX}"


def _token_bytes(tokens) -> bytes:
    a = array("I", tokens)
    if a.itemsize != 4:
        raise AssertionError("array('I') is not 32-bit here")
    return a.tobytes()


def write_state(folder: Path, key: StateKey, tokens: tuple[int, ...], data, temp_prefix: str) -> Path:
    """Write to a temporary file in `folder`, fsync, then rename into place (atomic)."""
    import tempfile

    token_bytes = _token_bytes(tokens)
    header = json.dumps({"key": asdict(key), "n_tokens": len(tokens), "tokens_crc": zlib.crc32(token_bytes),
                         "data_bytes": len(data), "data_crc": zlib.crc32(data)}).encode()
    final = folder / file_name(key, tokens)
    fd, temp = tempfile.mkstemp(prefix=temp_prefix, dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(MAGIC + _LEN.pack(len(header)) + header + token_bytes)
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temp, final)
    except BaseException:
        try:
            os.unlink(temp)
        except OSError:
            pass
        raise
    return final


def read_header(path: Path) -> tuple[Header, tuple[int, ...]]:
    """The header and tokens (not the state bytes), checked; BadStateFile when they are wrong."""
    with open(path, "rb") as f:
        header, tokens, _ = _read_front(f, path.stat().st_size)
    return header, tokens


def read_state(path: Path, key: StateKey) -> tuple[tuple[int, ...], bytearray]:
    """(tokens, state bytes), only when the whole file is intact and saved under `key`."""
    with open(path, "rb") as f:
        header, tokens, offset = _read_front(f, os.fstat(f.fileno()).st_size)
        if header.key != key:
            raise BadStateFile("saved for another model or KV layout")
        data = bytearray(header.data_bytes)  # writable: llama.cpp reads it through ctypes
        got = f.readinto(data)
    if got != header.data_bytes or zlib.crc32(data) != header.data_crc:
        raise BadStateFile("its state bytes do not match their checksum")
    return tokens, data


def _read_front(f, size: int) -> tuple[Header, tuple[int, ...], int]:
    front = f.read(len(MAGIC) + _LEN.size)
    if len(front) < len(MAGIC) + _LEN.size or front[:len(MAGIC)] != MAGIC:
        raise BadStateFile("not a saved KV state (or another format version)")
    (n,) = _LEN.unpack(front[len(MAGIC):])
    if n > MAX_HEADER:
        raise BadStateFile("header too large")
    try:
        raw = json.loads(f.read(n))
        header = Header(StateKey(**raw["key"]), int(raw["n_tokens"]), int(raw["tokens_crc"]),
                        int(raw["data_bytes"]), int(raw["data_crc"]))
    except (ValueError, KeyError, TypeError) as exc:
        raise BadStateFile(f"unreadable header ({exc})") from None
    token_bytes = f.read(4 * header.n_tokens)
    offset = len(front) + n + len(token_bytes)
    if len(token_bytes) != 4 * header.n_tokens or zlib.crc32(token_bytes) != header.tokens_crc:
        raise BadStateFile("its tokens do not match their checksum")
    if offset + header.data_bytes != size:
        raise BadStateFile(f"{size} bytes, its header says {offset + header.data_bytes} (truncated?)")
    return header, tuple(array("I", token_bytes)), offset
