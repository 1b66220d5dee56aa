"""The Vulkan plug-in (and the Mesa and LLVM it maps) loads only in a process that will use a
device: not for a CPU-only model, nor where no device file says a GPU is there and
GGML_VK_VISIBLE_DEVICES names none (issue 48 item 5). Each case is a child process, as
loading is once per process; the decision itself is tests/engine/test_gpu_probe.py."""

from __future__ import annotations

import json

from tests.gpu.conftest import run

CHILD = """
import json, sys
from pathlib import Path
from edge_infer.config import EngineSettings
from edge_infer.engine.native.llama import LlamaModel, init_backend
from edge_infer.engine.devices.placement import place
from edge_infer.gguf.info import read_model_info

def mapped():
    return sorted({l.split()[-1].rsplit('/', 1)[-1] for l in open('/proc/self/maps')
                   if any(k in l for k in ('libggml-vulkan', 'libvulkan.so', 'libLLVM'))})

path = Path(sys.argv[1])
report = {}
if sys.argv[2] == "cpu-only":  # --n-gpu-layers 0: the plan and the load
    placement = place(read_model_info(path), EngineSettings(n_gpu_layers=0, ctx=256))
    LlamaModel(path, n_gpu_layers=placement.n_gpu_layers).close()
    report["cpu_only"] = {"mapped": mapped(), "layers": placement.n_gpu_layers}
info = init_backend()  # a caller that needs the devices (the default plan, inspect)
report["devices"] = {"mapped": mapped(), "devices": info.devices, "skipped": info.gpu_plugins_skipped}
print(json.dumps(report))
"""


def child(env, model, mode) -> dict:
    proc = run(["-c", CHILD, model, mode], env, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_a_cpu_only_model_loads_no_gpu_plugin_until_devices_are_asked_for(gpu_env, smollm2_path):
    report = child(gpu_env, smollm2_path, "cpu-only")
    assert report["cpu_only"] == {"mapped": [], "layers": 0}
    later = report["devices"]
    assert "libggml-vulkan.so" in later["mapped"] and "Vulkan0" in later["devices"] and not later["skipped"]


def test_without_a_device_file_or_the_variable_the_plugin_stays_unloaded(gpu_env, smollm2_path):
    from edge_infer.engine.native import gpu_probe

    env = {k: v for k, v in gpu_env.items() if k != gpu_probe.VK_VISIBLE}
    here, _ = gpu_probe.plugin_wanted("vulkan", "linux", env, gpu_probe.gpu_device_files())
    report = child(env, smollm2_path, "devices")["devices"]
    if here:  # a machine with a GPU: loaded as before
        assert "libggml-vulkan.so" in report["mapped"] and not report["skipped"]
    else:     # this one: no Mesa, no LLVM, and inspect says why
        assert report["mapped"] == [] and report["devices"] == ["CPU"]
        assert "GGML_VK_VISIBLE_DEVICES" in report["skipped"]["libggml-vulkan.so"]
