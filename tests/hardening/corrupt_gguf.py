"""Section `gguf`: corrupt copies of a real GGUF file, fed to the CLI's commands. Each
must end with a one-line error: no signal, no traceback, no hang, no success.

GGUF v3 layout, little-endian: b"GGUF", u32 version, u64 tensor_count, u64 kv_count;
kv_count KVs (u64 key length + key, u32 type, value); tensor_count infos (name string,
u32 n_dims, u64 dims[n_dims], u32 type, u64 offset); padding to general.alignment
(default 32); tensor data. Parsed with struct here, not the gguf package, so that the
probe needs nothing but the stdlib.
"""

from __future__ import annotations

import os
import random
import shlex
import signal
import struct
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from .common import Section

_SCALAR = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}  # type -> bytes
T_STRING, T_ARRAY, T_U32 = 8, 9, 4


@dataclass
class KV:
    key: str
    at: int          # offset of the key's u64 length
    type: int
    value_at: int


@dataclass
class TensorInfo:
    name: str
    at: int          # offset of the name's u64 length
    n_dims_at: int
    dims_at: int
    offset_at: int   # offset of the u64 data offset


@dataclass
class Layout:
    data: bytes
    kvs: list[KV] = field(default_factory=list)
    tensors: list[TensorInfo] = field(default_factory=list)
    infos_end: int = 0


def parse(data: bytes) -> Layout:
    if data[:4] != b"GGUF":
        raise ValueError("not a GGUF file")
    n_tensors, n_kv = struct.unpack_from("<QQ", data, 8)
    lay, pos = Layout(data), 24
    for _ in range(n_kv):
        at = pos
        key, pos = _string(data, pos)
        (vtype,) = struct.unpack_from("<I", data, pos)
        lay.kvs.append(KV(key, at, vtype, pos + 4))
        pos = _skip_value(data, pos + 4, vtype)
    for _ in range(n_tensors):
        at = pos
        name, pos = _string(data, pos)
        (n_dims,) = struct.unpack_from("<I", data, pos)
        dims_at = pos + 4
        pos = dims_at + 8 * n_dims + 4  # dims, then the u32 type
        lay.tensors.append(TensorInfo(name, at, dims_at - 4, dims_at, pos))
        pos += 8
    lay.infos_end = pos
    return lay


def _string(data: bytes, pos: int) -> tuple[str, int]:
    (n,) = struct.unpack_from("<Q", data, pos)
    return data[pos + 8:pos + 8 + n].decode("utf-8", "replace"), pos + 8 + n


def _skip_value(data: bytes, pos: int, vtype: int) -> int:
    if vtype in _SCALAR:
        return pos + _SCALAR[vtype]
    if vtype == T_STRING:
        return pos + 8 + struct.unpack_from("<Q", data, pos)[0]
    if vtype == T_ARRAY:
        etype, n = struct.unpack_from("<IQ", data, pos)
        pos += 12
        if etype in _SCALAR:
            return pos + n * _SCALAR[etype]
        for _ in range(n):
            pos = _skip_value(data, pos, etype)
        return pos
    raise ValueError(f"unknown GGUF value type {vtype} at {pos}")


def _patch(data: bytes, at: int, fmt: str, *values) -> bytes:
    b = bytearray(data)
    struct.pack_into(fmt, b, at, *values)
    return bytes(b)


def _alignment(lay: Layout, value: int) -> bytes:
    """general.alignment = value: overwrite it if present, else insert it as the first KV."""
    for kv in lay.kvs:
        if kv.key == "general.alignment" and kv.type == T_U32:
            return _patch(lay.data, kv.value_at, "<I", value)
    key = b"general.alignment"
    entry = struct.pack("<Q", len(key)) + key + struct.pack("<II", T_U32, value)
    head = _patch(lay.data[:24], 16, "<Q", len(lay.kvs) + 1)
    return head + entry + lay.data[24:]


def _first_string_value(lay: Layout) -> KV:
    return next(kv for kv in lay.kvs if kv.type == T_STRING)


def corruptions(lay: Layout) -> dict[str, bytes | None]:
    """name -> file bytes (None: a directory). Header fields at fixed offsets (4 version,
    8 tensor count, 16 KV count, 24 first key length); the rest found by parse()."""
    d, t0 = lay.data, lay.tensors[0]
    rng = random.Random(0)
    return {
        "trunc-0": b"", "trunc-3": d[:3], "trunc-10": d[:10], "trunc-100": d[:100],
        "bad-magic": b"GGUX" + d[4:],
        "version-0": _patch(d, 4, "<I", 0), "version-999": _patch(d, 4, "<I", 999),
        "tensor-count-2e60": _patch(d, 8, "<Q", 2**60), "kv-count-2e60": _patch(d, 16, "<Q", 2**60),
        "key-len-2e63": _patch(d, 24, "<Q", 2**63),
        "string-past-eof": _patch(d, _first_string_value(lay).value_at, "<Q", len(d)),
        "alignment-0": _alignment(lay, 0), "alignment-3": _alignment(lay, 3),
        "tensor-offset-past-end": _patch(d, t0.offset_at, "<Q", 1 << 40),
        "tensor-dims-absurd": _patch(d, t0.dims_at, "<Q", 2**62),
        "tensor-n-dims-99": _patch(d, t0.n_dims_at, "<I", 99),
        "array-of-arrays": _patch(d, next(kv for kv in lay.kvs if kv.type == T_ARRAY).value_at, "<I", T_ARRAY),
        "half-file": d[:len(d) // 2],
        "zero-filled": bytes(1 << 20),
        "random-bytes": rng.randbytes(1 << 20),
        "text-file": b"this is not a model, just text that ends in .gguf\n",
        "directory": None,
    }


def make_corrupt_ggufs(src: str | Path, dest_dir: str | Path) -> list[Path]:
    """Write every corruption of `src` into dest_dir as NAME.gguf; returns their paths."""
    dest = Path(dest_dir)
    dest.mkdir(parents=True, exist_ok=True)
    out = []
    for name, data in corruptions(parse(Path(src).read_bytes())).items():
        p = dest / f"{name}.gguf"
        if data is None:
            p.mkdir(exist_ok=True)
            (p / "model.gguf").write_bytes(b"GGUF")
        else:
            p.write_bytes(data)
        out.append(p)
    return out


# ---- running the CLI on them -------------------------------------------------------------
COMMANDS = {
    "inspect": lambda f: ["inspect", f],
    "run": lambda f: ["run", f, "hi", "--max-tokens", "1"],
    "import": lambda f: ["import", f],
    "serve": lambda f: ["serve", f, "--port", "0"],
}


def run_cli(cli: list[str], args: list[str], env: dict, timeout: float) -> dict:
    """One command; its own process group so a timeout kills all of it."""
    proc = subprocess.Popen(cli + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
        rc = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        rc = None
    return {"rc": rc, "stderr": err.decode("utf-8", "replace"), "stdout": out.decode("utf-8", "replace")}


def classify(res: dict) -> tuple[str, str]:
    """(verdict, last stderr line): crash / hang / accepted / messy / clean."""
    lines = [ln.strip() for ln in res["stderr"].splitlines() if ln.strip()]
    last = lines[-1] if lines else ""
    if res["rc"] is None:
        return "hang", last
    if res["rc"] < 0 or "Traceback" in res["stderr"]:
        return "crash", last
    if res["rc"] == 0:
        return "accepted", last
    return ("clean", last) if last and len(last) <= 300 else ("messy", last)


def run_gguf(cli: str, gguf: str | Path, *, timeout: float = 60.0, workers: int = 2,
             commands: tuple[str, ...] = tuple(COMMANDS)) -> dict:
    sec = Section("gguf")
    cli_argv = shlex.split(cli)
    with tempfile.TemporaryDirectory(prefix="edge-probe-gguf-") as tmp:
        files = make_corrupt_ggufs(gguf, Path(tmp) / "files")
        env = _isolated_env(Path(tmp))
        jobs = [(cmd, f) for cmd in commands for f in files]
        with ThreadPoolExecutor(workers) as pool:
            results = list(pool.map(lambda j: run_cli(cli_argv, COMMANDS[j[0]](str(j[1])), env, timeout), jobs))
    errors: dict[str, set[str]] = {}  # distinct error line (temp dir stripped) -> commands
    for cmd in commands:
        rows = [(f, res, *classify(res)) for (c, f), res in zip(jobs, results) if c == cmd]
        _command_figures(sec, cmd, rows)
        for f, _, verdict, last in rows:
            if verdict == "clean":
                errors.setdefault(last.replace(str(f.parent) + os.sep, ""), set()).add(cmd)
    sec.add("distinct error lines", len(errors))
    for line, cmds in errors.items():
        sec.notes.append(f"[{','.join(c for c in commands if c in cmds)}] {line}")
    return sec.done()


def _isolated_env(tmp: Path) -> dict:
    """The store, cache and XDG dirs inside tmp: `import` must not touch the user's store."""
    env = dict(os.environ)
    home = tmp / "home"
    env.update(EDGE_INFER_HOME=str(home), EDGE_INFER_MODELS=str(home / "models"),
               EDGE_INFER_CACHE=str(tmp / "cache"), XDG_DATA_HOME=str(tmp / "xdg-data"),
               XDG_CACHE_HOME=str(tmp / "xdg-cache"))
    return env


def _command_figures(sec: Section, cmd: str, rows: list) -> None:
    count = {v: sum(1 for *_, verdict, _ in rows if verdict == v)
             for v in ("crash", "hang", "accepted", "messy", "clean")}
    sec.add(f"{cmd}: files", len(rows))
    sec.add(f"{cmd}: crashes", count["crash"], "== 0", count["crash"] == 0)
    sec.add(f"{cmd}: hangs", count["hang"], "== 0", count["hang"] == 0)
    sec.add(f"{cmd}: accepted (rc 0)", count["accepted"], "== 0", count["accepted"] == 0)
    sec.add(f"{cmd}: one-line errors", count["clean"], f"== {len(rows)}", count["clean"] == len(rows))
    for f, res, verdict, last in rows:
        if verdict != "clean":
            tail = "\n".join(res["stderr"].strip().splitlines()[-6:])
            sec.example(f"{cmd}: {verdict}", {"file": f.name, "rc": res["rc"], "stderr_tail": tail[-1200:]},
                        limit=25)
