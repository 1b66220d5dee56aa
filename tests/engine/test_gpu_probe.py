"""Which GPU plug-ins load, from faked device files and environments: the machine running
the tests has no GPU, but the decision must be right for one with a GPU too (issue 48 item 5)."""

import pytest

from edge_infer.engine.native import backend, gpu_probe
from edge_infer.engine.native.gpu_probe import plugin_wanted

NO_GPU = frozenset()
AMD_OR_INTEL = frozenset({"dri/card0", "dri/renderD128"})
NVIDIA = frozenset({"nvidiactl", "nvidia-uvm", "nvidia0"})
NVIDIA_DRIVER_NO_GPU = frozenset({"nvidiactl", "nvidia-uvm"})
WSL2 = frozenset({"dxg"})
ROCM = frozenset({"kfd", "dri/renderD128"})
VK_SOFTWARE = {"GGML_VK_VISIBLE_DEVICES": "0"}


@pytest.mark.parametrize("backend_name, env, files, load", [
    ("vulkan", {}, NO_GPU, False),                # llvmpipe only: llama.cpp would skip it anyway
    ("vulkan", VK_SOFTWARE, NO_GPU, True),        # the GPU tests' software device
    ("vulkan", {"GGML_VK_VISIBLE_DEVICES": " "}, NO_GPU, False),  # names no device
    ("vulkan", {}, AMD_OR_INTEL, True),
    ("vulkan", {}, frozenset({"dri/card0"}), False),  # a display-only device (no render node)
    ("vulkan", {}, NVIDIA, True),
    ("vulkan", {}, NVIDIA_DRIVER_NO_GPU, False),
    ("vulkan", {}, WSL2, True),
    ("vulkan", {}, frozenset({"kgsl-3d0"}), True),  # Android's Adreno
    ("cuda", {}, NVIDIA, True),
    ("cuda", {}, WSL2, True),
    ("cuda", {}, AMD_OR_INTEL, False),
    ("cuda", VK_SOFTWARE, NO_GPU, False),
    ("hip", {}, ROCM, True),
    ("hip", {}, AMD_OR_INTEL, False),
    ("blas", {}, NO_GPU, True),                    # no device file to check: loads as before
])
def test_linux_loads_a_plugin_only_where_a_device_file_says_a_gpu_is_there(backend_name, env, files, load):
    wanted, why = plugin_wanted(backend_name, "linux", env, files)
    assert wanted is load and why


@pytest.mark.parametrize("platform", ["darwin", "win32"])
def test_other_platforms_load_every_plugin_as_before(platform):
    assert plugin_wanted("vulkan", platform, {}, NO_GPU)[0]
    assert plugin_wanted("cuda", platform, {}, NO_GPU)[0]


def test_the_reason_names_the_files_looked_for_and_the_variable():
    why = plugin_wanted("vulkan", "linux", {}, NO_GPU)[1]
    assert "/dev/dri/renderD*" in why and "GGML_VK_VISIBLE_DEVICES" in why
    assert "/dev/nvidia0" in plugin_wanted("cuda", "linux", {}, NVIDIA)[1]


def test_device_files_are_found_under_dev(tmp_path):
    (tmp_path / "dri").mkdir()
    for name in ("dri/renderD128", "dri/card0", "nvidia0", "nvidiactl", "null", "kfd"):
        (tmp_path / name).write_bytes(b"")
    assert gpu_probe.gpu_device_files(tmp_path) == {"dri/renderD128", "nvidia0", "kfd"}
    assert gpu_probe.gpu_device_files(tmp_path / "missing") == frozenset()


def test_plugin_files_name_their_backend():
    assert gpu_probe.plugin_backend("libggml-vulkan.so") == "vulkan"
    assert gpu_probe.plugin_backend("/x/ggml-cuda.dll") == "cuda"


def test_a_skipped_plugin_is_recorded_and_never_opened(monkeypatch, tmp_path):
    (tmp_path / "libggml-vulkan.so").write_bytes(b"")
    opened = []

    class FakeGgml:
        def ggml_backend_load(self, path):
            opened.append(path)
            return 1

    monkeypatch.setattr(backend, "ggml_library", lambda: FakeGgml())
    monkeypatch.setattr(backend, "_extra_bufts", lambda ggml: (["CPU"], []))
    monkeypatch.setattr(backend.sys, "platform", "linux")
    info = backend.BackendInfo("cpu", [], "zen4", ["zen4"], [], True, "", lib_dir=str(tmp_path))
    backend.load_gpu_plugins(info, env={}, device_files=NO_GPU)
    assert not opened and "no GPU device file" in info.gpu_plugins_skipped["libggml-vulkan.so"]
    assert info.gpus_probed and info.devices == ["CPU"]

    info = backend.BackendInfo("cpu", [], "zen4", ["zen4"], [], True, "", lib_dir=str(tmp_path))
    backend.load_gpu_plugins(info, env=VK_SOFTWARE, device_files=NO_GPU)
    assert opened == [str(tmp_path / "libggml-vulkan.so").encode()] and not info.gpu_plugins_skipped
