"""Real offload on the software Vulkan device: layers on the device by llama.cpp's own
report, the plan within 10% of its buffers, the same greedy text as the CPU (or next-token
distributions within a KL bound where float order makes them part), splits and refusals as
the plan says. Each check is packaging/gpu_check.py, the script a lent GPU machine runs."""

from __future__ import annotations

import json
import shutil

from tests.gpu.conftest import ROOT, gpu_check, run

MiB = 2**20


def gpu_runs(result: dict) -> dict[str, dict]:
    return {r["label"]: r for r in result["runs"] if "label" in r}


def device_row(run: dict, name: str = "Vulkan0") -> dict:
    return next(r for r in run["devices"] if r["device"] == name)


def test_all_then_half_of_the_layers_on_the_device(gpu_env, smollm2_path, tmp_path):
    proc, result = gpu_check(gpu_env, smollm2_path, tmp_path, "--layers", "all,half")
    assert proc.returncode == 0 and result["ok"], proc.stdout + proc.stderr
    assert result["devices"] == ["Vulkan0"]
    runs = gpu_runs(result)
    slots = runs["all"]["n_gpu_layers"]
    assert slots == 31  # SmolLM2: 30 layers + output
    assert runs["half"]["n_gpu_layers"] == slots // 2
    for label, expect_layers in (("all", slots), ("half", slots // 2)):
        run_ = runs[label]
        dev = device_row(run_)
        assert dev["layers"] == expect_layers
        assert dev["model"] > 0 and dev["kv"] > 0  # llama.cpp's buffers are on the device
        assert abs(dev["planned"] - dev["llama_cpp"]) <= 0.10 * dev["llama_cpp"]
        assert run_["kl_mean"] < 0.02 and run_["kl_max"] < 0.5  # nats, along the CPU's greedy reply
    # Half the layers leave the rest, and the token embeddings, on the CPU.
    assert device_row(runs["half"])["model"] < device_row(runs["all"])["model"]


def test_a_budget_smaller_than_the_model_splits_it(gpu_env, smollm2_path, tmp_path):
    proc, result = gpu_check(gpu_env, smollm2_path, tmp_path, "--layers", "auto", "--gpu-memory", "150MiB")
    assert proc.returncode == 0 and result["ok"], proc.stdout + proc.stderr
    run_ = gpu_runs(result)["auto"]
    dev = device_row(run_)
    assert 0 < run_["n_gpu_layers"] < 31 and dev["layers"] == run_["n_gpu_layers"]
    assert dev["planned"] <= 150 * MiB and abs(dev["planned"] - dev["llama_cpp"]) <= 0.10 * dev["llama_cpp"]


def test_layers_the_device_cannot_hold_are_refused_with_the_numbers(gpu_env, smollm2_path):
    proc = run(["-m", "edge_infer", "run", smollm2_path, "Hi", "--n-gpu-layers", "-1", "--gpu-memory", "40MiB",
                "--max-tokens", "4"], gpu_env, timeout=300)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    line = proc.stderr.strip().splitlines()[-1]
    assert "Vulkan0" in line and "40.0 MiB free" in line and "MiB on Vulkan0" in line


def test_inspect_shows_the_device_and_where_each_layer_goes(gpu_env, smollm2_path):
    proc = run(["-m", "edge_infer", "inspect", smollm2_path, "--json"], gpu_env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert [d["name"] for d in out["devices"]] == ["Vulkan0"]
    assert out["devices"][0]["max_tensor_bytes"] == 128 * MiB  # llvmpipe's maxStorageBufferRange, asked of ggml
    plan = out["plan"]
    assert plan["devices"] == ["Vulkan0"] and plan["n_gpu_layers"] == 31  # offload is the default
    rows = {r["device"]: r for r in plan["placement"]}
    assert rows["Vulkan0"]["layers"] == 31 and rows["CPU"]["layers"] == 0
    text = run(["-m", "edge_infer", "inspect", smollm2_path], gpu_env, timeout=300).stdout
    assert "Vulkan0" in text and "31 of 31 layers" in text


def test_device_script_runs_under_a_debugger_and_keeps_a_crash(gpu_env, smollm2_path, tmp_path):
    """The lent-GPU script (`gpu_check.py device`), dry-run on the software device: a clean
    check passes through gdb; a crash leaves the native and the Python stack in its log."""
    common = ["--gpu", "vulkan", "--threads", "1", "--poll", "0", "--ctx", "128", "--parallel", "1",
              "--max-tokens", "3", "--no-fill", "--layers", "all"]
    ok = run([ROOT / "packaging" / "gpu_check.py", "device", smollm2_path, "--out", tmp_path / "ok", *common],
             gpu_env)
    assert ok.returncode == 0 and "DEVICE CHECK OK" in ok.stdout, ok.stdout[-3000:] + ok.stderr[-2000:]
    result = json.loads((tmp_path / "ok" / f"{smollm2_path.stem}.json").read_text())
    assert result["ok"] and result["devices"] == ["Vulkan0"]
    crash = run([ROOT / "packaging" / "gpu_check.py", "device", smollm2_path, "--out", tmp_path / "crash",
                 "--crash-test", *common], gpu_env)
    assert crash.returncode == 1 and "DEVICE CHECK FAILED" in crash.stdout
    log = (tmp_path / "crash" / f"{smollm2_path.stem}.log").read_text()
    assert "SIGSEGV" in log and "Fatal Python error: Segmentation fault" in log and "in check" in log
    if shutil.which("gdb"):
        assert "#0 " in log  # gdb's native backtrace
