"""The software GPU: Mesa's Vulkan driver (llvmpipe) under llama.cpp's Vulkan plug-in.

llama.cpp skips CPU-type Vulkan devices unless GGML_VK_VISIBLE_DEVICES names one, and it
reads that once, when the plug-in loads: so every GPU test runs in a child process with it
set, and the rest of the suite (in this process) stays on the CPU backend. A crash on the
device kills the child, never the suite. `make test` installs the driver and builds the
plug-in (packaging/vulkan_deps.sh, packaging/gpu_plugin.py); without them these tests skip
and say which is missing.
"""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _plugin() -> Path | None:
    import llama_cpp.llama_cpp as bindings

    found = sorted(Path(bindings._base_path).glob("libggml-vulkan.*"))
    return found[0] if found else None


@pytest.fixture(scope="session")
def gpu_env():
    """The environment of a child process that sees the software Vulkan device."""
    missing = None
    if _plugin() is None:
        missing = "llama.cpp's Vulkan plug-in is not installed: `make test-gpu` builds it"
    elif not glob.glob("/usr/share/vulkan/icd.d/lvp_icd.*.json"):
        missing = "Mesa's Vulkan driver (mesa-vulkan-drivers) is not installed: packaging/vulkan_deps.sh"
    if missing:
        # CI's machines can always have the software GPU (.ci/run runs `make test`, which installs
        # it): there a missing one is a failure. Elsewhere (no apt, not root) the tests say why.
        (pytest.fail if os.environ.get("CI") else pytest.skip)(missing)
    return {**os.environ, "GGML_VK_VISIBLE_DEVICES": "0", "PYTHONFAULTHANDLER": "1"}


def run(args, env, timeout=600, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *map(str, args)], env=env, capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT, **kw)


def gpu_check(env, model, tmp_path, *flags) -> tuple[subprocess.CompletedProcess, dict]:
    out = tmp_path / "check.json"
    # Small: llvmpipe runs every op as a Vulkan dispatch on the CPU (about 1 token/s here), and
    # ggml's CPU threads must not spin beside it (--poll 0, one thread). Its memory report is
    # fixed (2 GiB free whatever is allocated), so filling the KV pool would show nothing.
    proc = run([ROOT / "packaging" / "gpu_check.py", "check", model, "--json", out, "--threads", "1",
                "--poll", "0", "--ctx", "128", "--parallel", "1", "--max-tokens", "5", "--no-fill", *flags], env)
    assert out.exists(), proc.stdout + proc.stderr
    return proc, json.loads(out.read_text())
