"""llama.cpp's RPC backend: other machines' devices as devices of this process, and this
machine's devices served to others (`edge-infer worker`). One library does both
(libggml-rpc, `make rpc`), loaded with the other backends (engine/native/backend.py).

The RPC client ends the whole process when a worker cannot be reached or answers badly
(GGML_ABORT in ggml-rpc.cpp), so every address is probed here first (connect and the
protocol's HELLO) and a model on workers runs in a child process (engine/child.py)."""

from __future__ import annotations

import ctypes
import socket
import struct

from edge_infer.errors import WorkerError
from edge_infer.plan.machine import REMOTE, Device

RPC_CMD_GET_DEVICE_MEMORY = 11  # ggml-rpc.cpp's enum rpc_cmd
RPC_CMD_HELLO = 14          # ggml-rpc.cpp: "RPC_CMD_HELLO must be always 14"
RPC_CMD_DEVICE_COUNT = 15
PROTO_MAJOR = 7             # ggml-rpc.h: RPC_PROTO_MAJOR_VERSION of the vendored llama.cpp
CONN_CAPS = 24              # transport.h: RPC_CONN_CAPS_SIZE
PROBE_TIMEOUT = 3.0


def parse_endpoint(endpoint: str) -> tuple[str, int]:
    host, sep, port = endpoint.strip().rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise WorkerError(f"worker address {endpoint!r}: give HOST:PORT, e.g. 192.168.1.20:50052")
    return host.strip("[]"), int(port)


def parse_endpoints(value: str | list[str] | tuple[str, ...] | None) -> tuple[str, ...]:
    """'a:1,b:2' or ['a:1', 'b:2'] -> ('a:1', 'b:2'), each checked."""
    if not value:
        return ()
    items = value.split(",") if isinstance(value, str) else list(value)
    out = tuple(dict.fromkeys(i.strip() for i in items if i.strip()))
    for e in out:
        parse_endpoint(e)
    return out


def _recv(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed the connection during the handshake")
        data += chunk
    return data


def _command(sock: socket.socket, cmd: int, payload: bytes, answer: int) -> bytes:
    """One request / response of llama.cpp's RPC protocol: | cmd | u64 size | payload |,
    answered by | u64 size | answer |."""
    sock.sendall(bytes([cmd]) + struct.pack("<Q", len(payload)) + payload)
    size = struct.unpack("<Q", _recv(sock, 8))[0]
    if size != answer:
        raise WorkerError(f"answered command {cmd} with {size} bytes, not {answer}: not an RPC worker "
                          "of this llama.cpp version")
    return _recv(sock, size)


def probe(endpoint: str, timeout: float = PROBE_TIMEOUT) -> list[tuple[int, int]]:
    """Connect, say HELLO as llama.cpp's client would, and ask each of the worker's devices for
    its (free, total) bytes; raises WorkerError (one line naming the address) where llama.cpp's
    client would have ended the process. Python only: no llama.cpp, nothing registered."""
    host, port = parse_endpoint(endpoint)
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            major, minor, patch = _command(sock, RPC_CMD_HELLO, bytes(CONN_CAPS), 4 + CONN_CAPS)[:3]
            if major != PROTO_MAJOR:
                raise WorkerError(f"speaks RPC {major}.{minor}.{patch}; this edge-infer speaks {PROTO_MAJOR}.x: "
                                  "run the same edge-infer version there")
            count = struct.unpack("<I", _command(sock, RPC_CMD_DEVICE_COUNT, b"", 4))[0]
            return [struct.unpack("<QQ", _command(sock, RPC_CMD_GET_DEVICE_MEMORY, struct.pack("<I", i), 16))
                    for i in range(count)]
    except WorkerError as exc:
        raise WorkerError(f"worker {endpoint} {exc}") from None
    except (OSError, ConnectionError) as exc:
        raise WorkerError(f"worker {endpoint} does not answer: {exc.strerror or exc}") from None


def worker_devices(endpoints: tuple[str, ...]) -> tuple[Device, ...]:
    """The workers' devices as llama.cpp will list them once registered (RPC0, RPC1, ... in
    order, each described by its address), from a probe of each."""
    found = []
    for e in endpoints:
        for i, (free, total) in enumerate(probe(e)):
            found.append(Device(name=f"RPC{len(found)}", total_bytes=total, free_bytes=free, kind=REMOTE,
                                description=e if i == 0 else f"{e}#{i}"))
    return tuple(found)


def _rpc_reg(ggml):
    reg = ggml.ggml_backend_reg_by_name(b"RPC")
    if not reg:
        raise WorkerError("this install has no RPC backend: `make rpc` builds it (README: More than one machine)")
    return reg


def add_workers(endpoints: tuple[str, ...]) -> None:
    """Probe each worker, then register its devices with llama.cpp (as `--rpc` does);
    once per process. Their devices then come first in the offload list."""
    from edge_infer.engine.native import backend
    from edge_infer.engine.native.llama import init_backend

    for e in endpoints:
        probe(e)
    init_backend()
    ggml = backend.ggml_library()
    add = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_char_p)(
        ggml.ggml_backend_reg_get_proc_address(_rpc_reg(ggml), b"ggml_backend_rpc_add_server"))
    for e in endpoints:
        ggml.ggml_backend_register(add(e.encode()))


def serve_devices(endpoint: str, device_names: list[str], n_threads: int, cache_dir: str | None) -> None:
    """This machine's devices for other machines' llama.cpp; blocks for ever (rpc-server's loop)."""
    from edge_infer.engine.native import backend
    from edge_infer.engine.native.llama import init_backend

    init_backend()
    ggml = backend.ggml_library()
    start = ctypes.CFUNCTYPE(None, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_size_t,
                             ctypes.POINTER(ctypes.c_void_p))(
        ggml.ggml_backend_reg_get_proc_address(_rpc_reg(ggml), b"ggml_backend_rpc_start_server"))
    devs = []
    for name in device_names:
        dev = ggml.ggml_backend_dev_by_name(name.encode())
        if not dev:
            raise WorkerError(f"no device {name!r} here (edge-infer inspect lists them)")
        devs.append(dev)
    array = (ctypes.c_void_p * len(devs))(*devs)
    start(endpoint.encode(), cache_dir.encode() if cache_dir else None, n_threads, len(devs), array)
