"""An API client's conversation survives a server restart: `serve` stopped with SIGTERM writes
its conversations' KV to the disk tier, and the next process restores the history instead of
evaluating it (usage.prompt_tokens_details.cached_tokens, /metrics)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import httpx

from tests.server.conftest import short_socket_path

HISTORY = [{"role": "system", "content": "You keep the ledger."},
           {"role": "user", "content": " ".join(f"Crate {i} holds {i * 3} apples." for i in range(60))}]


def start(model, socket, kv_dir, log):
    env = {**os.environ, "EDGE_INFER_KV_CACHE": str(kv_dir)}
    with open(log, "w") as out:  # a file, not a pipe: a full pipe would block the server's logging
        p = subprocess.Popen([sys.executable, "-m", "edge_infer", "serve", str(model), "--socket", socket,
                              "--threads", "2", "--ctx", "2048", "--disk-cache", "1GiB", "--only"],
                             stdout=out, stderr=subprocess.STDOUT, text=True, env=env)
    for _ in range(600):
        if "Ctrl-C stops" in log.read_text() or p.poll() is not None:
            break
        time.sleep(0.1)
    assert p.poll() is None, log.read_text()
    return p


def chat(socket, messages) -> dict:
    with httpx.Client(transport=httpx.HTTPTransport(uds=socket), base_url="http://x", timeout=120) as c:
        r = c.post("/v1/chat/completions", json={"messages": messages, "max_tokens": 6, "temperature": 0})
        assert r.status_code == 200, r.text
        return r.json()


def metric(socket, name) -> float:
    with httpx.Client(transport=httpx.HTTPTransport(uds=socket), base_url="http://x", timeout=30) as c:
        for line in c.get("/metrics").text.splitlines():
            if line.startswith(name + "{") or line.startswith(name + " "):
                return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name} not in /metrics")


def test_a_conversation_continues_after_a_restart_without_reading_its_history_again(smollm2_path, tmp_path):
    kv_dir, socket = tmp_path / "kv", short_socket_path()
    p = start(smollm2_path, socket, kv_dir, tmp_path / "first.log")
    try:
        first = chat(socket, HISTORY)
        assert "disk (" in (tmp_path / "first.log").read_text()  # the start line names the tier
    finally:
        p.terminate()  # SIGTERM: a clean stop writes the conversations to disk
        p.wait(timeout=60)
    assert list(kv_dir.glob("*.kv")), (tmp_path / "first.log").read_text()

    p = start(smollm2_path, socket, kv_dir, tmp_path / "second.log")
    try:
        turn = HISTORY + [{"role": "assistant", "content": first["choices"][0]["message"]["content"]},
                          {"role": "user", "content": "How many apples in crate 7?"}]
        second = chat(socket, turn)
        history = first["usage"]["prompt_tokens"]
        assert second["usage"]["prompt_tokens_details"]["cached_tokens"] >= history, second["usage"]
        assert metric(socket, "edge_infer_disk_cache_hits_total") == 1
        assert metric(socket, "edge_infer_disk_cache_restored_tokens_total") >= history
    finally:
        p.terminate()
        p.wait(timeout=60)
