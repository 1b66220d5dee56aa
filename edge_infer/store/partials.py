"""The store's hidden partial area: downloads not yet verified, their lock, and the
listing and discarding of the ones a pull left unfinished.

    <models>/.partial/<sha256>.part   bytes received so far (a prefix of the file)
    <models>/.partial/<sha256>.json   what it is: url, repo, revision, file, size, sha256
    <models>/.partial/<sha256>.lock   held while a process downloads it

A partial file is named by the sha256 it must end up with, so a later run, after a
dropped connection or a killed process, finds it and continues where it stopped.
`ModelStore` never looks in here, so a partial or unverified file is never a model.
"""

from __future__ import annotations

import json
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock, Timeout

from edge_infer.store.download_errors import DownloadBusyError

PARTIAL_DIR = ".partial"


@dataclass(frozen=True)
class PartialDownload:
    part: Path
    have: int
    size: int
    sha256: str
    repo: str
    path: str

    @property
    def label(self) -> str:
        return f"{self.repo}/{self.path}" if self.repo else self.path


def partial_dir(models_root: Path) -> Path:
    return Path(models_root) / PARTIAL_DIR


@contextmanager
def download_lock(path: Path):
    """Held while one process (or thread) downloads into a partial file; a second one is
    refused at once, not queued. filelock guards on Windows too, where fcntl did not."""
    lock = FileLock(path, timeout=0)
    try:
        lock.acquire()
    except Timeout:
        raise DownloadBusyError(f"another edge-infer process is downloading {path.stem} "
                                f"right now; wait for it to finish") from None
    try:
        yield
    finally:
        lock.release()


def list_partials(models_root: Path) -> list[PartialDownload]:
    """Downloads in progress or interrupted (resumable by running the same pull again)."""
    found = []
    folder = partial_dir(models_root)
    if not folder.is_dir():
        return found
    for meta in sorted(folder.glob("*.json")):
        part = meta.with_suffix(".part")
        try:
            data = json.loads(meta.read_text(encoding="utf-8"))
            have = part.stat().st_size if part.exists() else 0
            found.append(PartialDownload(part, have, int(data["size"]), data["sha256"],
                                         data.get("repo", ""), data.get("path", "")))
        except (OSError, ValueError, KeyError):
            continue
    return found


def discard_partial(partial: PartialDownload) -> None:
    """Delete an interrupted download's bytes and description (the user gave up on it).
    Refused while a pull holds its lock: that download is still running."""
    lock = partial.part.with_suffix(".lock")
    with download_lock(lock):
        partial.part.unlink(missing_ok=True)
        partial.part.with_suffix(".json").unlink(missing_ok=True)
    lock.unlink(missing_ok=True)
