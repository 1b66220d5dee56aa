"""Check the GPU-offload path of a GPU build (CUDA) of llama-cpp-python on a machine with a GPU.

    python packaging/gpu_check.py MODEL.gguf [--threads N]

Prints, side by side: what the machine detection and the memory plan say, llama.cpp's own
buffer report and the process's GPU memory (nvidia-smi) after a load and after a full KV pool,
the greedy text on the GPU vs the CPU, and tokens/s at 1 and 8 sequences on each. Exits 1 when
the plan misses llama.cpp's GPU buffers by more than 10% or the GPU is not used at all.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from edge_infer.config import EngineSettings  # noqa: E402
from edge_infer.engine import Engine, Request, SamplingParams  # noqa: E402
from edge_infer.gguf.info import read_model_info  # noqa: E402
from edge_infer.plan import detect_machine, engine_estimate_kwargs, plan_memory  # noqa: E402

MiB = 2**20
PROMPT = "<|im_start|>user\nWrite a short story about a lighthouse keeper.<|im_end|>\n<|im_start|>assistant\n"
# llama.cpp's load log: "CUDA0 model buffer size = 92.10 MiB", "CUDA0 KV buffer size = ...".
BUFFER = re.compile(r"(\w+) (model|KV|compute) buffer size\s*=\s*([\d.]+) MiB")


def gpu_used_by_this_process() -> int:
    try:
        out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True).stdout
    except OSError:  # no driver here
        return 0
    for line in out.strip().splitlines():
        pid, used = (p.strip() for p in line.split(","))
        if int(pid) == os.getpid():
            return int(used) * MiB
    return 0


def buffers(load_log: list[str]) -> dict[str, float]:
    found: dict[str, float] = {}
    for line in load_log:
        for dev, kind, mib in BUFFER.findall(line):
            found[f"{dev} {kind}"] = found.get(f"{dev} {kind}", 0.0) + float(mib)
    return found


def tok_s(engine: Engine, n: int, max_tokens: int = 128) -> float:
    done: list[int] = []

    def one(i: int) -> None:
        r = engine.generate(Request(prompt=PROMPT.replace("lighthouse keeper", f"keeper number {i}"),
                                    sampling=SamplingParams(temperature=0.0, max_tokens=max_tokens, ignore_eos=True)))
        done.append(len(r.tokens))

    t0 = time.perf_counter()
    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(done) / (time.perf_counter() - t0)


def fill_pool(engine: Engine) -> int:
    """Every slot holds a long prompt at once: the pool's pages are all touched."""
    n_prompt = min(engine.n_ctx_seq, engine.pool_cells // engine.settings.parallel) - 40
    words = " ".join(f"w{i}" for i in range(4 * n_prompt))
    tokens = engine.tokenize(words)[:n_prompt]
    threads = [threading.Thread(target=engine.generate, args=(Request(
        prompt_tokens=tokens[j:] + tokens[:j], sampling=SamplingParams(temperature=0.0, max_tokens=8)),))
        for j in range(engine.settings.parallel)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return len(tokens)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("model", type=Path)
    p.add_argument("--threads", type=int, default=min(8, os.cpu_count() or 2))
    p.add_argument("--ctx", type=int, default=4096)
    p.add_argument("--parallel", type=int, default=4)
    args = p.parse_args()
    # llama.cpp's own log on stderr: where a load dies, its last lines say how far it got.
    logging.basicConfig(level=logging.DEBUG if os.environ.get("EDGE_INFER_GPU_CHECK_DEBUG") else logging.INFO)

    machine = detect_machine()
    print(f"machine: {machine.describe()}; offload: {machine.gpu_offload}")
    info = read_model_info(args.model)
    plan = plan_memory(info, machine, ctx=args.ctx, parallel=args.parallel,
                       **engine_estimate_kwargs(EngineSettings(ctx=args.ctx, parallel=args.parallel)))
    print(f"plan: ctx {plan.ctx} x {plan.parallel}, n_gpu_layers {plan.n_gpu_layers}, "
          f"GPU {plan.estimate.gpu_bytes / MiB:.1f} MiB, CPU {plan.estimate.cpu_bytes / MiB:.1f} MiB")
    ok = machine.gpu_offload and plan.n_gpu_layers != 0

    texts, speeds = {}, {}
    for label, layers in (("gpu", -1), ("cpu", 0)):
        before = gpu_used_by_this_process()
        engine = Engine(args.model, EngineSettings(ctx=args.ctx, parallel=args.parallel, n_gpu_layers=layers,
                                                   n_threads=args.threads))
        try:
            found = buffers(engine.load_log)
            est = engine.plan
            print(f"\n[{label}] n_gpu_layers {layers}: devices {engine.backend.devices}, CPU variant {engine.backend.variant}")
            print(f"  llama.cpp buffers (MiB): " + ", ".join(f"{k} {v:.1f}" for k, v in sorted(found.items())))
            gpu_reported = sum(v for k, v in found.items() if not k.startswith("CPU") and "_Host" not in k) * MiB
            print(f"  plan GPU {est.gpu_bytes / MiB:.1f} MiB vs llama.cpp's GPU buffers {gpu_reported / MiB:.1f} MiB"
                  + (f" ({est.gpu_bytes / gpu_reported:.3f}x)" if gpu_reported else ""))
            loaded = gpu_used_by_this_process()
            print(f"  nvidia-smi, this process: {before / MiB:.0f} MiB before load, {loaded / MiB:.0f} after")
            n = fill_pool(engine)
            full = gpu_used_by_this_process()
            print(f"  after {args.parallel} x {n}-token prompts (full pool): {full / MiB:.0f} MiB")
            if layers:
                ok = ok and gpu_reported > 0 and abs(est.gpu_bytes - gpu_reported) <= 0.10 * gpu_reported
            r = engine.generate(Request(prompt=PROMPT, sampling=SamplingParams(temperature=0.0, max_tokens=48)))
            texts[label] = r.text
            speeds[label] = (tok_s(engine, 1), tok_s(engine, 8))
            print(f"  tok/s: 1 sequence {speeds[label][0]:.1f}, 8 sequences {speeds[label][1]:.1f}")
        finally:
            engine.close()

    print("\ngreedy text, GPU:", repr(texts["gpu"][:120]))
    print("greedy text, CPU:", repr(texts["cpu"][:120]))
    same = sum(a == b for a, b in zip(texts["gpu"], texts["cpu"]))
    print(f"same first {same} characters of {len(texts['cpu'])}")
    print(f"GPU/CPU tok/s: {speeds['gpu'][0] / speeds['cpu'][0]:.2f}x at 1, {speeds['gpu'][1] / speeds['cpu'][1]:.2f}x at 8")
    print("GPU CHECK", "OK" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
