"""The server and the app on an offloaded engine (the software Vulkan device): one request
each, and the device's memory where users look for it (/metrics, /props, the Stats tab)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time

import httpx
import openai

from tests.gpu.conftest import ROOT, run
from tests.server.conftest import short_socket_path


def test_server_answers_from_the_device_and_reports_its_memory(gpu_env, smollm2_path, tmp_path):
    sock = short_socket_path()
    log = tmp_path / "serve.log"
    with open(log, "w") as out:
        p = subprocess.Popen([sys.executable, "-m", "edge_infer", "serve", str(smollm2_path), "--socket", sock,
                              "--ctx", "1024", "--parallel", "2", "--threads", "2"],
                             stdout=out, stderr=subprocess.STDOUT, env=gpu_env, cwd=ROOT)
    try:
        for _ in range(3000):
            if "Ctrl-C stops" in log.read_text() or p.poll() is not None:
                break
            time.sleep(0.1)
        assert p.poll() is None, log.read_text()
        http = httpx.Client(transport=httpx.HTTPTransport(uds=sock), base_url="http://x", timeout=300)
        client = openai.OpenAI(base_url="http://x/v1", api_key="none", http_client=http)
        reply = client.chat.completions.create(model=smollm2_path.stem, max_tokens=8, temperature=0,
                                               messages=[{"role": "user", "content": "Say hello."}])
        assert reply.choices[0].message.content and reply.usage.completion_tokens > 0
        props = http.get("/props").json()
        assert props["n_gpu_layers"] == 31, props  # offloaded by default: the device fits it
        dev = {d["device"]: d for d in props["devices"]}["Vulkan0"]
        assert dev["layers"] == 31 and dev["model_bytes"] > 0 and dev["total_bytes"] > 0
        metrics = http.get("/metrics").text
        vk = re.findall(r'edge_infer_device_memory_bytes\{.*device="Vulkan0".*\} (\S+)', metrics)
        assert len(vk) == 3 and sum(float(v) for v in vk) > 0, metrics
        assert re.search(r'edge_infer_device_total_bytes\{.*device="Vulkan0".*\} [1-9]', metrics)
        assert http.get("/v1/stats").json()["devices"][1]["device"] == "Vulkan0"
    finally:
        p.terminate()
        p.wait(timeout=60)


def test_app_chats_on_the_device_and_shows_it_in_stats(gpu_env, smollm2_path, tmp_path):
    proc = run([ROOT / "tests" / "gpu" / "tui_on_gpu.py", smollm2_path, tmp_path], gpu_env, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["n_gpu_layers"] == 31 and out["reply"].strip()
    assert "Vulkan0: 31 layers" in out["stats_text"]
