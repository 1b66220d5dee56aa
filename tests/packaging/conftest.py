"""Build the desktop binary once per session (only when a source file is newer than it)."""

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BINARY = ROOT / "dist" / "edge-infer"


def _newest_source() -> float:
    files = [*ROOT.joinpath("edge_infer").rglob("*.py"), *ROOT.joinpath("edge_infer").rglob("*.tcss"),
             *ROOT.joinpath("packaging").iterdir(), ROOT / "models" / "catalog.toml"]
    return max(f.stat().st_mtime for f in files if f.is_file())


@pytest.fixture(scope="session")
def binary() -> Path:
    if os.environ.get("EDGE_INFER_BINARY"):
        return Path(os.environ["EDGE_INFER_BINARY"])
    if not BINARY.exists() or BINARY.stat().st_mtime < _newest_source():
        r = subprocess.run([str(ROOT / "packaging" / "build.sh")], cwd=ROOT, capture_output=True, text=True,
                           timeout=1200)
        assert r.returncode == 0, f"PyInstaller build failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return BINARY


@pytest.fixture
def clean_env(tmp_path):
    """No virtualenv, no Python on PATH beyond the system's, and an empty home."""
    home = tmp_path / "home"
    home.mkdir()
    return {"HOME": str(home), "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "TERM": "xterm-256color"}
