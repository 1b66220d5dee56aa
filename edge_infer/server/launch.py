"""Binding and running: TCP on loopback (other hosts only with an API key) or a Unix
socket created mode 0600 (in a folder created 0700 if missing), replacing a stale one and
removed on exit.

We bind the sockets ourselves and hand them to uvicorn: its own `uds=` option would
chmod the socket 0666, and a pre-bound socket also lets tests use port 0.
"""

from __future__ import annotations

import contextlib
import errno
import ipaddress
import os
import socket
import stat
import threading
from pathlib import Path

from edge_infer.errors import EdgeInferError


class BindError(EdgeInferError):
    pass


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_exposure(host: str, api_key: str | None, keys_file: str | None = None) -> None:
    """Anyone who can reach a non-loopback address could use the model: demand a key (one,
    or a file of them)."""
    if not is_loopback(host) and not api_key and not keys_file:
        raise BindError(f"refusing to listen on {host} without an API key: other machines could reach "
                        f"it; pass --api-key/--api-key-file (or EDGE_INFER_API_KEY) or --api-keys-file, "
                        f"or use 127.0.0.1")


def bind_tcp(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    # proto=IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY only on sockets that say they are
    # TCP. Without it Nagle held each response's last segment for the client's delayed ACK:
    # 40 ms on every request of a keep-alive connection.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # accepted sockets inherit it
    try:
        sock.bind((host.strip("[]"), port))
    except OSError as exc:
        sock.close()
        raise BindError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    sock.listen(2048)
    return sock


def bind_unix(path: str | Path) -> socket.socket:
    path = Path(path).expanduser()
    try:  # a folder we create is ours alone (0700): nobody else may even see the socket
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise BindError(f"cannot create the folder {path.parent}: {exc.strerror}") from None
    _clear_stale(path)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)  # created 0600: no window where others could connect
    try:
        sock.bind(str(path))
    except OSError as exc:
        sock.close()
        raise BindError(f"cannot create the socket {path}: {exc.strerror}") from None
    finally:
        os.umask(old)
    os.chmod(path, 0o600)
    _ours[str(path)] = path.lstat().st_ino
    sock.listen(2048)
    return sock


_ours: dict[str, int] = {}  # socket path -> inode of the file we created


def _clear_stale(path: Path) -> None:
    """Remove a socket file nobody listens on; never a live socket or a regular file."""
    try:
        st = path.lstat()
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(st.st_mode):
        raise BindError(f"{path} exists and is not a socket; not replacing it")
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(str(path))
    except OSError as exc:
        if exc.errno not in (errno.ECONNREFUSED, errno.ENOENT):
            raise BindError(f"cannot check the socket {path}: {exc.strerror}") from None
        path.unlink(missing_ok=True)  # stale: left by a server that died
        return
    finally:
        probe.close()
    raise BindError(f"another server is already listening on {path}")


def remove_unix(path: str | Path) -> None:
    """Unlink the socket file we created, unless another server has replaced it since."""
    path = Path(path).expanduser()
    with contextlib.suppress(OSError):
        if path.lstat().st_ino == _ours.pop(str(path), None):
            path.unlink()


def uvicorn_server(app, log_level: str = "warning"):
    import uvicorn

    from edge_infer.server.http_limits import MAX_CONNECTIONS, MAX_HEADER_BYTES, HeaderTimeoutH11Protocol

    config = uvicorn.Config(app, log_level=log_level, access_log=log_level in ("info", "debug"),
                            timeout_graceful_shutdown=3, lifespan="off", http=HeaderTimeoutH11Protocol,
                            limit_concurrency=MAX_CONNECTIONS, h11_max_incomplete_event_size=MAX_HEADER_BYTES)
    return uvicorn.Server(config)


class BackgroundServer:
    """uvicorn in a thread on pre-bound sockets: for tests and embedding (the TUI)."""

    def __init__(self, app, sockets: list[socket.socket], log_level: str = "warning"):
        self.server = uvicorn_server(app, log_level)
        self.sockets = sockets
        self.unix_paths = [s.getsockname() for s in sockets if s.family == socket.AF_UNIX]
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": sockets},
                                       name="edge-infer-http", daemon=True)

    def start(self, timeout: float = 30) -> "BackgroundServer":
        self.thread.start()
        for _ in range(int(timeout * 100)):
            if self.server.started:
                return self
            if not self.thread.is_alive():
                break
            threading.Event().wait(0.01)
        raise RuntimeError("the HTTP server did not start")

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
        for s in self.sockets:
            s.close()
        for path in self.unix_paths:
            remove_unix(path)
