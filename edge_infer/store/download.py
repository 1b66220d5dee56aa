"""Resumable, verified downloads into the store's hidden partial area (partials.py).

A later run, after a dropped connection or a killed process, finds the partial file by
the sha256 it must end up with and continues with an HTTP Range request. The file
leaves the partial area only after its size and sha256 matched.
"""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import os
import random
import shutil
import time
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from edge_infer.store.download_errors import ChecksumError, DiskFullError, DownloadError
from edge_infer.store.partials import download_lock, partial_dir
from edge_infer.units import human_bytes

try:  # huggingface_hub >= 1.x talks HTTP through httpx (2.x through its fork, httpx2)
    import httpx2 as httpx
except ImportError:  # pragma: no cover - depends on the installed huggingface_hub
    import httpx

log = logging.getLogger(__name__)
CHUNK = 1 << 20
DISK_RESERVE = 16 * 1024 * 1024   # never fill a disk to the last byte
Progress = Callable[[int, int], object]   # (bytes present, total bytes)


@dataclass(frozen=True)
class RemoteFile:
    url: str            # resolve URL (redirects to the CDN are followed on every request)
    size: int
    sha256: str
    repo: str = ""
    revision: str = ""
    path: str = ""      # file name inside the repo

    @property
    def name(self) -> str:
        return self.path.rsplit("/", 1)[-1] or self.url.rsplit("/", 1)[-1]


def check_disk_space(folder: Path, need: int, what: str) -> None:
    """Raise DiskFullError unless `need` more bytes fit on the disk holding `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(folder).free
    if need + DISK_RESERVE > free:
        raise DiskFullError(
            f"not enough free disk space for {what}: it needs {human_bytes(need)} more, the disk holding "
            f"{folder} has {human_bytes(free)} free. Free some space (or set EDGE_INFER_MODELS to a folder "
            f"on a bigger disk) and run the command again; nothing was installed")


def _write_chunk(fh, data: bytes) -> None:
    """One write; a seam for tests that fill the disk."""
    fh.write(data)


class Downloader:
    """Fetch RemoteFiles into the partial area with resume, retries and verification;
    the caller moves each verified file into place, then calls finish().

    `session` is an httpx-style client (huggingface_hub's get_session() by default, so
    proxies, certificates and HF_TOKEN headers apply as they do for huggingface_hub).
    """

    def __init__(self, models_root: Path, *, session=None, headers: dict | None = None,
                 retries: int = 5, backoff: float = 0.5, max_backoff: float = 16.0,
                 timeout: float = 30.0, chunk: int = CHUNK, progress: Progress | None = None,
                 sleep: Callable[[float], None] = time.sleep):
        self.folder = partial_dir(models_root)
        self._session = session
        self.headers = dict(headers or {})
        self.retries, self.backoff, self.max_backoff = retries, backoff, max_backoff
        self.timeout, self.chunk = timeout, chunk
        self.progress = progress or (lambda have, total: None)
        self.sleep = sleep
        self.log: list[str] = []   # one line per retry/restart, for the user and for tests

    @property
    def session(self):
        if self._session is None:
            from huggingface_hub import get_session

            return get_session()
        return self._session

    def paths(self, remote: RemoteFile) -> tuple[Path, Path, Path]:
        base = self.folder / remote.sha256.lower()
        return base.with_suffix(".part"), base.with_suffix(".json"), base.with_suffix(".lock")

    def remaining(self, remote: RemoteFile) -> int:
        part, meta, _ = self.paths(remote)
        have = part.stat().st_size if part.exists() and self._meta_matches(meta, remote) else 0
        return max(0, remote.size - have)

    def fetch(self, remote: RemoteFile) -> Path:
        """Download (or finish downloading) `remote`; return the verified partial path.
        The caller moves it into place (os.replace on the same disk: atomic)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        part, meta, lock = self.paths(remote)
        with download_lock(lock):
            if not self._meta_matches(meta, remote):
                part.unlink(missing_ok=True)
                self._write_meta(meta, remote)
            have = part.stat().st_size if part.exists() else 0
            if have > remote.size:
                self._note(f"{remote.name}: partial file is larger than the file; starting over")
                part.unlink()
                have = 0
            check_disk_space(self.folder, remote.size - have, remote.name)
            state = _State(have)
            if have:
                self._note(f"{remote.name}: resuming at {human_bytes(have)} of {human_bytes(remote.size)}")
                _hash_prefix(part, have, state.digest)
            with open(part, "ab", buffering=0) as fh:
                self._transfer(remote, fh, state)
                os.fsync(fh.fileno())
            got = state.digest.hexdigest()
            if state.have != remote.size or got != remote.sha256.lower():
                part.unlink(missing_ok=True)
                meta.unlink(missing_ok=True)
                raise ChecksumError(
                    f"{remote.name} failed verification: expected sha256 {remote.sha256} "
                    f"({remote.size} bytes), got {got} ({state.have} bytes). The damaged download "
                    f"was deleted and nothing was installed; run the command again to fetch it afresh")
        return part

    def finish(self, remote: RemoteFile) -> None:
        """Forget a download once its verified file was moved into place. Until then the
        partial (complete, verified) keeps its description, so a later run that has to
        redo another part of a split model does not fetch this one again."""
        part, meta, lock = self.paths(remote)
        part.unlink(missing_ok=True)
        meta.unlink(missing_ok=True)
        lock.unlink(missing_ok=True)

    # -- internals ----------------------------------------------------------------

    def _meta_matches(self, meta: Path, remote: RemoteFile) -> bool:
        try:
            data = json.loads(meta.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return False
        return data.get("sha256") == remote.sha256.lower() and int(data.get("size", -1)) == remote.size

    def _write_meta(self, meta: Path, remote: RemoteFile) -> None:
        data = asdict(remote)
        data["sha256"] = remote.sha256.lower()
        data["started_at"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
        tmp = meta.with_suffix(f".json.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
        os.replace(tmp, meta)

    def _note(self, line: str) -> None:
        self.log.append(line)
        log.info(line)

    def _transfer(self, remote: RemoteFile, fh, state: "_State") -> None:
        failures = 0
        while state.have < remote.size:
            before = state.have
            try:
                self._one_request(remote, fh, state)
                if state.have < remote.size:
                    raise _Retryable("the connection closed before the end of the file")
            except _Fatal as exc:
                raise DownloadError(f"downloading {remote.name} failed: {exc}") from None
            except (httpx.TransportError, httpx.StreamError, _Retryable) as exc:
                if state.have > before:
                    failures = 0  # it moved: a flaky connection, not a dead one
                failures += 1
                if failures > self.retries:
                    raise DownloadError(
                        f"downloading {remote.name} failed after {failures} attempts in a row: "
                        f"{_describe(exc)}. {human_bytes(state.have)} of {human_bytes(remote.size)} are kept; "
                        f"run the same command again to resume") from None
                wait = min(self.max_backoff, self.backoff * 2 ** (failures - 1)) * (0.75 + random.random() / 2)
                self._note(f"{remote.name}: {_describe(exc)} at {human_bytes(state.have)}; retry "
                           f"{failures}/{self.retries} in {wait:.1f}s")
                self.sleep(wait)

    def _one_request(self, remote: RemoteFile, fh, state: "_State") -> None:
        headers = dict(self.headers)
        headers["Accept-Encoding"] = "identity"
        if state.have:
            headers["Range"] = f"bytes={state.have}-"
        timeout = httpx.Timeout(self.timeout, connect=min(self.timeout, 10.0))
        with self.session.stream("GET", remote.url, headers=headers, timeout=timeout,
                                 follow_redirects=True) as resp:
            status = resp.status_code
            if status == 416 and state.have:
                # Nothing past what we have: complete, or the file changed. Verification decides.
                if state.have != remote.size:
                    self._restart(fh, state, remote, "the server has fewer bytes than expected")
                return
            if status in (408, 429, 500, 502, 503, 504):
                raise _Retryable(f"HTTP {status}")
            if status >= 400:
                raise _Fatal(f"HTTP {status} from {remote.url}")
            if state.have and status == 200:
                self._restart(fh, state, remote, "the server ignored the Range request")
            elif status == 206:
                start = _content_range_start(resp.headers.get("Content-Range", ""))
                if start != state.have:
                    raise _Retryable(f"the server answered from byte {start}, not {state.have}")
            # As the bytes arrive (no re-chunking): what was received before a drop is kept.
            for data in resp.iter_bytes():
                data = data[:remote.size - state.have]  # never write past the expected size
                try:
                    _write_chunk(fh, data)
                except OSError as exc:
                    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
                        raise DiskFullError(
                            f"the disk filled up while downloading {remote.name} ({human_bytes(state.have)} "
                            f"of {human_bytes(remote.size)} written). Free some space and run the command "
                            f"again: it resumes from the partial file in {self.folder}; nothing was "
                            f"installed") from None
                    raise
                state.add(data)
                self.progress(state.have, remote.size)
                if state.have >= remote.size:
                    break

    def _restart(self, fh, state: "_State", remote: RemoteFile, why: str) -> None:
        self._note(f"{remote.name}: {why}; starting over")
        fh.truncate(0)
        fh.seek(0)
        state.reset()


class _State:
    """Bytes in the partial file and the running sha256 over them."""

    def __init__(self, have: int = 0):
        self.have = have
        self.digest = hashlib.sha256()

    def add(self, data: bytes) -> None:
        self.digest.update(data)
        self.have += len(data)

    def reset(self) -> None:
        self.have = 0
        self.digest = hashlib.sha256()


class _Retryable(DownloadError):
    pass


class _Fatal(DownloadError):
    pass


def _describe(exc: BaseException) -> str:
    text = str(exc) or exc.__class__.__name__
    return text if len(text) < 120 else text[:117] + "..."


def _content_range_start(value: str) -> int:
    # "bytes 100-199/200"
    try:
        return int(value.split()[1].split("-")[0])
    except (IndexError, ValueError):
        return -1


def _hash_prefix(path: Path, n: int, digest) -> None:
    with open(path, "rb") as fh:
        left = n
        while left:
            data = fh.read(min(CHUNK * 8, left))
            if not data:
                break
            digest.update(data)
            left -= len(data)
