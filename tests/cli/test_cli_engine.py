"""The CLI as a user runs it: a real process, real model, real terminal streams."""

import json
import subprocess
import sys

import pytest


def edge_infer(*args, input=None, timeout=300):
    return subprocess.run([sys.executable, "-m", "edge_infer", *map(str, args)], input=input,
                          capture_output=True, text=True, timeout=timeout)


def test_run_streams_a_completion_with_stats(smollm2_path):
    r = edge_infer("run", smollm2_path, "The capital of France is", "--temperature", "0", "-n", "12", "--stats")
    assert r.returncode == 0, r.stderr
    assert len(r.stdout.strip()) > 3
    assert "TTFT" in r.stderr and "decode" in r.stderr and "tok/s" in r.stderr


def test_run_chat_uses_the_template(smollm2_path):
    r = edge_infer("run", smollm2_path, "What is the capital of France? One word.", "--chat",
                   "--temperature", "0", "-n", "20")
    assert r.returncode == 0, r.stderr
    assert "Paris" in r.stdout
    assert "<|im_start|>" not in r.stdout


def test_chat_is_multi_turn_and_reuses_history(smollm2_path):
    r = edge_infer("chat", smollm2_path, "--stats", "--temperature", "0", "-n", "16",
                   input="What is DNA?\nAnd RNA?\n/quit\n")
    assert r.returncode == 0, r.stderr
    stats = [line for line in r.stderr.splitlines() if "TTFT" in line]
    assert len(stats) == 2
    # The second turn reuses the first turn's tokens from the KV cache.
    assert "(0 cached)" in stats[0] and "(0 cached)" not in stats[1]


@pytest.mark.parametrize("content,message", [
    (None, "no such model file"),
    (b"hello, I am not a model\n" * 10, "not a GGUF file"),
    ("truncate", "truncated"),
])
def test_bad_model_files_give_clear_errors(tmp_path, smollm2_path, content, message):
    path = tmp_path / "model.gguf"
    if content == "truncate":
        with open(smollm2_path, "rb") as f:
            path.write_bytes(f.read(5_000_000))
    elif content is not None:
        path.write_bytes(content)
    r = edge_infer("run", path, "hi", "-n", "2")
    assert r.returncode == 2
    assert message in r.stderr
    assert "Traceback" not in r.stderr


def test_context_overflow_is_a_clear_error(smollm2_path):
    r = edge_infer("run", smollm2_path, "word " * 200, "--ctx", "64", "-n", "2")
    assert r.returncode == 2
    assert "context holds 64" in r.stderr and "Traceback" not in r.stderr


def test_bench_prints_engine_and_baseline_side_by_side(smollm2_path, tmp_path):
    out = tmp_path / "bench.json"
    r = edge_infer("bench", smollm2_path, "--concurrency", "1,2", "--requests", "2", "--max-tokens", "8",
                   "--json", out)
    assert r.returncode == 0, r.stderr
    # One table per baseline: Llama as shipped, and Llama with the engine's flash attention.
    rows = [line.split()[0] for line in r.stdout.splitlines()
            if len(line.split()) > 2 and line.split()[1].isdigit()]
    assert rows == ["engine", "llama_cpp", "engine", "llama_cpp"] + ["engine", "llama_cpp+fa"] * 2
    assert "as shipped (flash attention off)" in r.stdout
    data = json.loads(out.read_text())
    assert [p["concurrency"] for p in data["engine"]] == [1, 2]
    assert set(data["baselines"]) == {"llama_cpp", "llama_cpp+fa"}
    for base in data["baselines"].values():
        assert all(p["errors"] == 0 and p["tokens"] > 0 for p in data["engine"] + base["passes"])
        assert set(base["ratios"]) == {"1", "2"}


@pytest.mark.parametrize("flags,message", [
    (["--kv-budget", "lots"], "--kv-budget 'lots': give a size like 256MiB, 1GiB or 8192cells"),
    (["--kv-budget", "1MiB"], "less than llama.cpp's minimum of 256"),
    (["--kv-budget", "512cells", "--kv-split"], "--kv-budget sizes the shared KV pool: drop --kv-split"),
    (["--cache-type-v", "q4_0", "--flash-attn", "off"], "--cache-type-v q4_0 needs flash attention"),
])
def test_bad_memory_settings_are_one_line_errors(smollm2_path, flags, message):
    r = edge_infer("run", smollm2_path, "Hi", "-n", "2", *flags)
    assert r.returncode == 2 and message in r.stderr and "Traceback" not in r.stderr, r.stderr[-800:]


def test_quantized_kv_cache_generates(smollm2_path):
    r = edge_infer("run", smollm2_path, "The capital of France is", "-n", "8", "--temperature", "0",
                   "--cache-type-k", "q8_0", "--cache-type-v", "q8_0", "--kv-budget", "512cells")
    assert r.returncode == 0, r.stderr[-800:]
    assert "Paris" in r.stdout
