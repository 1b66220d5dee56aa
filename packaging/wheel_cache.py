"""Where built llama.cpp artifacts are kept and what names them: the llama-cpp-python version
we build from, and a cache key that is a hash of everything that shapes a build. Shared by the
wheel (llama_wheel.py), its GPU plug-ins (gpu_plugin.py) and llama-server (llama_server.py);
pip's wheel cache does not key on CMAKE_ARGS, so a different flag set never reuses a build."""

from __future__ import annotations

import hashlib
import os
import sys
import sysconfig
from pathlib import Path

VERSION = "0.3.36"  # keep equal to the pin in pyproject.toml
PACKAGE = "llama-cpp-python"


def cache_key(flags: list[str]) -> str:
    tag = f"{sys.implementation.cache_tag}-{sysconfig.get_platform()}"
    digest = hashlib.sha256("\n".join([VERSION, tag, *flags]).encode()).hexdigest()[:12]
    return f"{VERSION}-{tag}-{digest}"


def wheel_root() -> Path:
    if os.environ.get("EDGE_INFER_WHEEL_CACHE"):
        return Path(os.environ["EDGE_INFER_WHEEL_CACHE"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "edge-infer" / "wheels"
