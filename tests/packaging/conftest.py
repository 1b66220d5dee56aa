"""Build the desktop binary once per session (only when a source file is newer than it).

The build (a minute or more, one core) starts in the background as soon as collection
shows packaging tests are selected, so it overlaps the tests that run before them;
the `binary` fixture waits for it."""

import os
import subprocess
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BINARY = ROOT / "dist" / "edge-infer"
_build: dict = {}


def _newest_source() -> float:
    files = [*ROOT.joinpath("edge_infer").rglob("*.py"), *ROOT.joinpath("edge_infer").rglob("*.tcss"),
             *ROOT.joinpath("packaging").iterdir(), ROOT / "models" / "catalog.toml"]
    return max(f.stat().st_mtime for f in files if f.is_file())


def _stale() -> bool:
    return not BINARY.exists() or BINARY.stat().st_mtime < _newest_source()


def start_build_if_needed(items) -> None:
    """Called from tests/conftest.py's pytest_collection_finish."""
    if os.environ.get("EDGE_INFER_BINARY") or _build or not _stale():
        return
    if os.environ.get("PYTEST_XDIST_WORKER"):  # every worker collects: the one that runs it builds
        return
    if not any(Path(str(item.fspath)).is_relative_to(ROOT / "tests" / "packaging") for item in items):
        return
    _launch()


@pytest.fixture(scope="session")
def binary() -> Path:
    if os.environ.get("EDGE_INFER_BINARY"):
        return Path(os.environ["EDGE_INFER_BINARY"])
    if "proc" not in _build and _stale():
        _launch()
    if "proc" in _build:
        proc, log = _build["proc"], _build["log"]
        rc = proc.wait(timeout=1200)
        log.seek(0)
        assert rc == 0, f"PyInstaller build failed:\n{log.read()[-6000:]}"
    return BINARY


def _launch() -> None:
    log = tempfile.TemporaryFile(mode="w+")
    _build["log"] = log
    _build["proc"] = subprocess.Popen([str(ROOT / "packaging" / "build.sh")], cwd=ROOT, stdout=log,
                                      stderr=subprocess.STDOUT, text=True)


@pytest.fixture
def clean_env(tmp_path):
    """No virtualenv, no Python on PATH beyond the system's, and an empty home."""
    home = tmp_path / "home"
    home.mkdir()
    return {"HOME": str(home), "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "TERM": "xterm-256color"}


def stop_build() -> None:
    proc = _build.get("proc")
    if proc is not None and proc.poll() is None:
        proc.terminate()
        proc.wait(timeout=30)
