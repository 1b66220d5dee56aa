"""A local stand-in for the Hugging Face Hub: the part of its HTTP API huggingface_hub
uses, serving real bytes, counting every byte it sends.

    GET  /api/models?search=&filter=&limit=&sort=       search (list_models)
    GET  /api/models/{repo}[/revision/{rev}][?blobs=1]  model_info (siblings, LFS sha256)
    GET  /api/models/{repo}/tree/{rev}[/{path}]         list_repo_tree
    HEAD|GET /{repo}/resolve/{rev}/{file}               302 to the "CDN" with X-Repo-Commit,
                                                        X-Linked-Size, X-Linked-Etag, ETag
    HEAD|GET /cdn/{sha256}                              the bytes; Range -> 206 / 416

The CDN is the same server under another host name (localhost vs 127.0.0.1), as the
real hub redirects LFS files to another host: huggingface_hub then reads the file's
metadata from the redirect itself. Faults for tests: drop the connection after N
bytes, stall at N bytes until released, corrupt a byte, fail with a status, go dark.

Run standalone (for trying the CLI by hand):
    python -m tests.hubserver REPO=FILE.gguf [REPO=FILE ...]   # prints the endpoint
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlparse

CHUNK = 64 * 1024


@dataclass
class Blob:
    path: Path | None
    data: bytes | None
    size: int
    sha256: str
    git_sha1: str

    def read(self, start: int, end: int) -> bytes:
        if self.data is not None:
            return self.data[start:end]
        with open(self.path, "rb") as fh:
            fh.seek(start)
            data = fh.read(end - start)
        return data + bytes(end - start - len(data))  # a template shorter than the blob: zeros


@dataclass
class Repo:
    repo_id: str
    commit: str
    files: dict[str, Blob]
    downloads: int = 0
    likes: int = 0
    tags: list[str] = field(default_factory=lambda: ["gguf"])


@dataclass
class Fault:
    drop_at: int | None = None       # close the connection after sending up to this offset
    stall_at: int | None = None      # stop sending at this offset until release() (or the client leaves)
    corrupt_at: int | None = None    # flip the byte at this offset
    times: int = 1                   # how many responses the drop/stall applies to


def _blob(source: bytes | Path) -> Blob:
    if isinstance(source, (bytes, bytearray)):
        data = bytes(source)
        sha = hashlib.sha256(data).hexdigest()
        return Blob(None, data, len(data), sha, hashlib.sha1(data).hexdigest())
    path = Path(source)
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 22):
            digest.update(chunk)
    sha = digest.hexdigest()
    return Blob(path, None, path.stat().st_size, sha, hashlib.sha1(sha.encode()).hexdigest())


class FakeHub:
    def __init__(self):
        self.repos: dict[str, Repo] = {}
        self.faults: dict[str, Fault] = {}     # by sha256
        self.fail_status: list[int] = []       # statuses to answer the next CDN GETs with
        self.dark = False                      # refuse everything (connection closed at once)
        self.bytes_served: dict[str, int] = {}  # by sha256: body bytes of CDN GETs
        self.requests: list[dict] = []
        self.released = threading.Event()
        self.throttle: float | None = None     # bytes per second for CDN bodies
        self.ignore_range = False              # answer every GET with the whole file (200)
        self.no_blobs = False                  # model_info ignores ?blobs (sizes only in the tree)
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- setup -------------------------------------------------------------------
    def add_repo(self, repo_id: str, files: dict[str, bytes | Path], *, downloads: int = 0,
                 likes: int = 0, tags: list[str] | None = None,
                 listed_only: dict[str, int] | None = None, template: Path | None = None) -> Repo:
        """`listed_only`: files listed with a size and a made-up sha256, whose bytes are
        those of `template` (zeros past its end): other quant levels for listing and
        verdict tests, whose headers can be read but which are never downloaded whole."""
        commit = hashlib.sha1(repo_id.encode() + str(len(self.repos)).encode()).hexdigest()
        blobs = {name: _blob(src) for name, src in files.items()}
        for name, size in (listed_only or {}).items():
            sha = hashlib.sha256(f"{repo_id}/{name}".encode()).hexdigest()
            blobs[name] = Blob(template, None, size, sha, hashlib.sha1(sha.encode()).hexdigest())
        repo = Repo(repo_id, commit, blobs, downloads, likes, tags or ["gguf"])
        self.repos[repo_id] = repo
        return repo

    def fault(self, sha256: str, **kwargs) -> Fault:
        f = Fault(**kwargs)
        self.faults[sha256] = f
        return f

    def served(self, sha256: str | None = None) -> int:
        with self._lock:
            return sum(self.bytes_served.values()) if sha256 is None else self.bytes_served.get(sha256, 0)

    def reset_counters(self) -> None:
        with self._lock:
            self.bytes_served.clear()
            self.requests.clear()

    def release(self) -> None:
        self.released.set()

    # -- lifecycle ---------------------------------------------------------------
    def start(self) -> "FakeHub":
        hub = self

        class Handler(_Handler):
            pass

        Handler.hub = hub
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.released.set()
        if self._server:
            self._server.shutdown()
            self._server.server_close()

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def cdn(self) -> str:
        return f"http://localhost:{self.port}"

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


class _Handler(BaseHTTPRequestHandler):
    hub: FakeHub
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):  # quiet
        pass

    # -- plumbing ----------------------------------------------------------------
    def _record(self, status: int, **extra) -> None:
        with self.hub._lock:
            self.hub.requests.append({"method": self.command, "path": self.path, "status": status,
                                      "range": self.headers.get("Range"), **extra})

    def _json(self, obj, status: int = 200, headers: dict | None = None) -> None:
        body = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
        self._record(status)

    def _error(self, status: int, code: str, message: str) -> None:
        self._json({"error": message}, status, {"X-Error-Code": code, "X-Error-Message": message})

    def do_HEAD(self):
        self._route()

    def do_GET(self):
        self._route()

    def _route(self):
        if self.hub.dark:
            self.close_connection = True
            self.connection.shutdown(2)
            return
        url = urlparse(self.path)
        path, query = unquote(url.path), parse_qs(url.query)
        try:
            if path == "/api/models":
                return self._search(query)
            m = re.match(r"^/api/models/([^/]+/[^/]+)/tree/([^/]+)(?:/(.*))?$", path)
            if m:
                return self._tree(m.group(1), m.group(2), m.group(3) or "")
            m = re.match(r"^/api/models/([^/]+/[^/]+)(?:/revision/([^/]+))?$", path)
            if m:
                return self._model_info(m.group(1), m.group(2) or "main", query)
            m = re.match(r"^/([^/]+/[^/]+)/resolve/([^/]+)/(.+)$", path)
            if m:
                return self._resolve(m.group(1), m.group(2), m.group(3))
            m = re.match(r"^/cdn/([0-9a-f]{64})$", path)
            if m:
                return self._cdn(m.group(1))
            self._error(404, "NotFound", f"no route for {path}")
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _repo(self, repo_id: str, revision: str) -> Repo | None:
        repo = self.hub.repos.get(repo_id)
        if repo is None:
            self._error(404, "RepoNotFound", f"Repository {repo_id} not found")
            return None
        if revision not in ("main", repo.commit):
            self._error(404, "RevisionNotFound", f"Invalid rev id: {revision}")
            return None
        return repo

    # -- API ---------------------------------------------------------------------
    def _search(self, query):
        words = (query.get("search") or [""])[0].lower()
        filters = query.get("filter") or []
        limit = int((query.get("limit") or ["1000"])[0])
        found = [r for r in self.hub.repos.values()
                 if words in r.repo_id.lower() and all(f in r.tags for f in filters)]
        found.sort(key=lambda r: -r.downloads)
        self._json([{"_id": r.commit[:24], "id": r.repo_id, "modelId": r.repo_id, "likes": r.likes,
                     "downloads": r.downloads, "tags": r.tags, "private": False,
                     "lastModified": "2025-01-02T03:04:05.000Z", "createdAt": "2025-01-01T00:00:00.000Z",
                     "library_name": "gguf"} for r in found[:limit]])

    def _model_info(self, repo_id, revision, query):
        repo = self._repo(repo_id, revision)
        if repo is None:
            return
        blobs = (query.get("blobs") or ["false"])[0].lower() in ("1", "true") and not self.hub.no_blobs
        siblings = []
        for name, b in sorted(repo.files.items()):
            s = {"rfilename": name}
            if blobs:
                s.update(size=b.size, blobId=b.git_sha1,
                         lfs={"sha256": b.sha256, "size": b.size, "pointerSize": 135})
            siblings.append(s)
        self._json({"_id": repo.commit[:24], "id": repo.repo_id, "modelId": repo.repo_id,
                    "sha": repo.commit, "private": False, "disabled": False, "gated": False,
                    "downloads": repo.downloads, "likes": repo.likes, "tags": repo.tags,
                    "library_name": "gguf", "lastModified": "2025-01-02T03:04:05.000Z",
                    "siblings": siblings})

    def _tree(self, repo_id, revision, folder):
        repo = self._repo(repo_id, revision)
        if repo is None:
            return
        out = []
        for name, b in sorted(repo.files.items()):
            if folder and not name.startswith(folder.rstrip("/") + "/"):
                continue
            out.append({"type": "file", "oid": b.git_sha1, "size": b.size, "path": name,
                        "lfs": {"oid": b.sha256, "size": b.size, "pointerSize": 135}})
        self._json(out)

    def _resolve(self, repo_id, revision, name):
        repo = self._repo(repo_id, revision)
        if repo is None:
            return
        blob = repo.files.get(name)
        if blob is None:
            return self._error(404, "EntryNotFound", f"{name} does not exist on {revision}")
        self.send_response(302)
        self.send_header("Location", f"{self.hub.cdn}/cdn/{blob.sha256}")
        self.send_header("X-Repo-Commit", repo.commit)
        self.send_header("X-Linked-Etag", f'"{blob.sha256}"')
        self.send_header("X-Linked-Size", str(blob.size))
        self.send_header("ETag", f'W/"{blob.git_sha1}"')
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Length", "0")
        self.end_headers()
        self._record(302)

    # -- the CDN -----------------------------------------------------------------
    def _cdn(self, sha256: str):
        blob = next((b for r in self.hub.repos.values() for b in r.files.values() if b.sha256 == sha256), None)
        if blob is None:
            return self._error(404, "EntryNotFound", "no such blob")
        if self.command == "GET" and self.hub.fail_status:
            status = self.hub.fail_status.pop(0)
            return self._error(status, "Unavailable", f"HTTP {status} (test fault)")
        start, end = 0, blob.size
        status = 200
        rng = None if self.hub.ignore_range else self.headers.get("Range")
        if rng:
            m = re.match(r"bytes=(\d+)-(\d*)$", rng.strip())
            if not m:
                return self._error(400, "BadRange", rng)
            start = int(m.group(1))
            end = min(blob.size, int(m.group(2)) + 1) if m.group(2) else blob.size
            if start >= blob.size:
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{blob.size}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                self._record(416)
                return
            status = 206
        self.send_response(status)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(end - start))
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("ETag", f'"{blob.sha256}"')
        if status == 206:
            self.send_header("Content-Range", f"bytes {start}-{end - 1}/{blob.size}")
        self.end_headers()
        self._record(status, start=start, end=end)
        if self.command == "HEAD":
            return
        fault = self.hub.faults.get(sha256)
        active = fault is not None and fault.times > 0
        if active and (fault.drop_at is not None or fault.stall_at is not None):
            fault.times -= 1
        pos = start
        while pos < end:
            stop = min(end, pos + CHUNK)
            if active and fault.drop_at is not None and pos < fault.drop_at <= stop:
                stop = fault.drop_at
            if active and fault.stall_at is not None and pos < fault.stall_at <= stop:
                stop = fault.stall_at
            data = blob.read(pos, stop)
            if fault is not None and fault.corrupt_at is not None and pos <= fault.corrupt_at < stop:
                i = fault.corrupt_at - pos
                data = data[:i] + bytes([data[i] ^ 0xFF]) + data[i + 1:]
            self.wfile.write(data)
            with self.hub._lock:
                self.hub.bytes_served[sha256] = self.hub.bytes_served.get(sha256, 0) + len(data)
            pos = stop
            if self.hub.throttle:
                time.sleep(len(data) / self.hub.throttle)
            if active and fault.drop_at is not None and pos == fault.drop_at:
                self.wfile.flush()
                self.close_connection = True
                self.connection.shutdown(2)
                return
            if active and fault.stall_at is not None and pos == fault.stall_at:
                self.wfile.flush()
                self.hub.released.wait(120)
                self.close_connection = True
                return


def main(argv: list[str] | None = None) -> None:
    import sys

    hub = FakeHub()
    for arg in argv if argv is not None else sys.argv[1:]:
        repo, _, files = arg.partition("=")
        hub.add_repo(repo, {Path(f).name: Path(f) for f in files.split(",")}, downloads=1)
    hub.start()
    print(hub.endpoint, flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        hub.stop()


if __name__ == "__main__":
    main()
