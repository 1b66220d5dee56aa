"""A GPU asked for where none can be used names what to do: the plug-in to build, or the driver."""

from types import SimpleNamespace

from edge_infer.engine.devices import devices
from edge_infer.engine.native import llama


def test_no_plugin_names_the_one_to_build(monkeypatch):
    monkeypatch.setattr(llama, "init_backend", lambda: SimpleNamespace(gpu_plugins=[], gpu_plugins_skipped={}))
    monkeypatch.setattr(devices, "_has_nvidia", lambda: False)
    assert "`make gpu GPU=vulkan`" in devices.missing_plugin_hint()
    monkeypatch.setattr(devices, "_has_nvidia", lambda: True)
    assert "`make gpu GPU=cuda`" in devices.missing_plugin_hint()


def test_a_plugin_without_a_device_points_at_the_driver(monkeypatch):
    monkeypatch.setattr(llama, "init_backend", lambda: SimpleNamespace(gpu_plugins=["libggml-vulkan.so"],
                                                                      gpu_plugins_skipped={}))
    hint = devices.missing_plugin_hint()
    assert "libggml-vulkan.so" in hint and "driver" in hint


def test_a_plugin_skipped_for_want_of_a_device_says_why(monkeypatch):
    why = "no GPU device file (/dev/dri/renderD*)"
    monkeypatch.setattr(llama, "init_backend", lambda: SimpleNamespace(
        gpu_plugins=["libggml-vulkan.so"], gpu_plugins_skipped={"libggml-vulkan.so": why}))
    assert devices.missing_plugin_hint() == f"libggml-vulkan.so not loaded: {why}"
