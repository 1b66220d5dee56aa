"""Check GPU offload on a real device: placement, memory, output, speed.

    python packaging/gpu_check.py check MODEL [--layers all,half] [--speed] [--json FILE]
    python packaging/gpu_check.py device [--gpu cuda] [--out DIR] [MODEL ...]

`check` loads MODEL on the CPU, then with every layer and with half of them on the GPU
devices llama.cpp reports, and prints per device: the plan's bytes vs llama.cpp's own
buffer report, the device's memory before and after a full KV pool, greedy text on the
GPU vs the CPU, and the KL divergence of next-token distributions (teacher-forced on the
CPU's greedy reply; float order differs between backends, so text may part after a while).
Exits 1 when a check fails: no layer on a device, the plan off by more than 10%, or KL
above its bound.

`device` is the one script for a lent GPU machine: it builds and installs the GPU plug-in
(packaging/gpu_plugin.py, cached), then runs `check` for each model in a child process
with Python's faulthandler on, under gdb (or cuda-gdb) in batch mode where one is
installed, so that a crash in llama.cpp leaves a native backtrace in DIR/<model>.log
instead of killing the script. The test suite runs the same script on Mesa's software
Vulkan device (GGML_VK_VISIBLE_DEVICES=0).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

MiB = 2**20
KL_MEAN_BOUND = 0.02   # nats, mean over the reply's positions
KL_MAX_BOUND = 0.5     # nats, any one position
PLAN_TOLERANCE = 0.10  # the plan's device bytes vs llama.cpp's buffers there
QUESTION = "Write a short story about a lighthouse keeper."


def prompt_tokens(engine) -> list[int]:
    return engine.tokenize_messages([{"role": "user", "content": QUESTION}])


def greedy(engine, max_tokens: int):
    from edge_infer.engine import Request, SamplingParams

    return engine.generate(Request(prompt_tokens=prompt_tokens(engine),
                                   sampling=SamplingParams(temperature=0.0, max_tokens=max_tokens)))


def tok_s(engine, n: int, max_tokens: int = 64) -> float:
    from edge_infer.engine import Request, SamplingParams

    done: list[int] = []

    def one(i: int) -> None:
        r = engine.generate(Request(prompt=f"Story number {i}: once upon a time",
                                    sampling=SamplingParams(temperature=0.0, max_tokens=max_tokens, ignore_eos=True)))
        done.append(len(r.tokens))

    t0 = time.perf_counter()
    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(done) / (time.perf_counter() - t0)


def fill_pool(engine) -> int:
    """Every slot holds a long prompt at once: the pool's pages are all touched."""
    from edge_infer.engine import Request, SamplingParams

    n_prompt = min(engine.n_ctx_seq, engine.pool_cells // engine.settings.parallel) - 40
    tokens = engine.tokenize(" ".join(f"w{i}" for i in range(4 * n_prompt)))[:n_prompt]
    threads = [threading.Thread(target=engine.generate, args=(Request(
        prompt_tokens=tokens[j:] + tokens[:j], sampling=SamplingParams(temperature=0.0, max_tokens=4)),))
        for j in range(engine.settings.parallel)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return len(tokens)


def next_token_logprobs(path: Path, tokens: list[int], n_gpu_layers: int, threads: int):
    """Log-probabilities of every next token along `tokens`, through llama-cpp-python's own
    Llama (the engine keeps no logits): one row per position."""
    import llama_cpp
    import numpy as np

    llm = llama_cpp.Llama(str(path), n_gpu_layers=n_gpu_layers, n_ctx=max(256, len(tokens) + 16),
                          n_batch=512, logits_all=True, n_threads=threads, verbose=False,
                          # Layers held by the CPU are computed there: else llama.cpp runs their
                          # big-batch ops on the GPU and "half" would be measured as "all".
                          op_offload=False)
    try:
        llm.eval(tokens)
        scores = np.array(llm.scores[:len(tokens)], dtype=np.float64)
    finally:
        llm.close()
    scores -= scores.max(axis=1, keepdims=True)
    return scores - np.log(np.exp(scores).sum(axis=1, keepdims=True))


def kl_divergence(p_log, q_log, start: int) -> tuple[float, float, float]:
    """(mean KL(p || q), max KL, share of positions whose most likely token agrees), from `start`."""
    import numpy as np

    p, q = p_log[start:], q_log[start:]
    kl = (np.exp(p) * (p - q)).sum(axis=1)
    agree = float((p.argmax(axis=1) == q.argmax(axis=1)).mean())
    return float(kl.mean()), float(kl.max()), agree


def run_one(path: Path, layers: int, args, cpu_tokens: list[int] | None) -> dict:
    from edge_infer.config import EngineSettings
    from edge_infer.engine import Engine, list_devices

    t0 = time.perf_counter()
    settings = EngineSettings(ctx=args.ctx, parallel=args.parallel, n_gpu_layers=layers, n_threads=args.threads,
                              gpu_memory=args.gpu_memory or "", poll=args.poll)
    engine = Engine(path, settings)
    try:
        free_before = {d.name: d.free_bytes for d in list_devices()}
        rows = []
        for d in engine.snapshot().devices:
            rows.append({"device": d.device, "layers": d.layers, "planned": d.planned_bytes,
                         "llama_cpp": d.allocated_bytes, "model": d.model_bytes, "kv": d.kv_bytes,
                         "compute": d.compute_bytes})
        t_load = time.perf_counter()
        n = fill_pool(engine) if args.fill_pool else 0
        t_fill = time.perf_counter()
        free_full = {d.name: d.free_bytes for d in list_devices()}
        for row in rows:
            row["free_after_load"] = free_before.get(row["device"], 0)
            row["free_full_pool"] = free_full.get(row["device"], 0)
        reply = greedy(engine, args.max_tokens)
        seconds = {"load": t_load - t0, "fill_pool": t_fill - t_load, "greedy": time.perf_counter() - t_fill}
        out = {"n_gpu_layers": engine.placement.n_gpu_layers, "asked": layers, "devices": rows,
               "seconds": {k: round(v, 2) for k, v in seconds.items()},
               "pool_prompt_tokens": n, "text": reply.text, "tokens": list(reply.tokens),
               "prompt": prompt_tokens(engine), "backend": engine.backend.summary()}
        if args.speed:
            out["tok_s"] = [round(tok_s(engine, 1), 1), round(tok_s(engine, 8), 1)]
        return out
    finally:
        engine.close()


def check(args) -> int:
    if args.crash_test:  # proves the backtrace capture of `device`: a SIGSEGV in native code
        import ctypes
        print("crashing on purpose (--crash-test)", flush=True)
        ctypes.string_at(0)
    from edge_infer.engine import this_machine
    from edge_infer.gguf.info import read_model_info

    path = Path(args.model)
    if not path.exists():
        from edge_infer.store.store import ModelStore
        path = ModelStore().resolve(args.model)
    info = read_model_info(path)
    machine = this_machine()
    result = {"model": info.name, "path": str(path), "machine": machine.describe(),
              "devices": [d.name for d in machine.devices], "runs": [], "ok": True, "failures": []}
    print(f"{info.name}: {machine.describe()}", flush=True)
    if not machine.devices:
        result["ok"] = False
        result["failures"].append("no GPU device: is the plug-in installed and its driver present?")
    cpu = run_one(path, 0, args, None)
    result["runs"].append(cpu)
    slots = info.block_count + 1
    wanted = {"all": -1, "half": slots // 2, "auto": None}
    reference = None  # the CPU's next-token log-probabilities, computed once
    for name in (w for w in args.layers.split(",") if w) if machine.devices else ():
        layers = wanted[name] if name in wanted else int(name)
        run = run_one(path, layers, args, cpu["tokens"])
        run["label"] = name
        teacher = cpu["prompt"] + cpu["tokens"]
        t0 = time.perf_counter()
        p = reference if reference is not None else next_token_logprobs(path, teacher, 0, args.threads)
        reference = p
        q = next_token_logprobs(path, teacher, run["n_gpu_layers"], args.threads)
        start = len(cpu["prompt"]) - 1
        mean, worst, agree = kl_divergence(p, q, start)
        run["seconds"]["kl"] = round(time.perf_counter() - t0, 2)
        run.update(kl_mean=mean, kl_max=worst, top1_agreement=agree,
                   max_logprob_diff=float(abs(p[start:] - q[start:]).max()), kl_positions=len(teacher) - start,
                   same_prefix_chars=next((i for i, (a, b) in enumerate(zip(run["text"], cpu["text"])) if a != b),
                                          min(len(run["text"]), len(cpu["text"]))))
        result["runs"].append(run)
        report(run, cpu)
        gpu_rows = [r for r in run["devices"] if r["device"] != "CPU"]
        if not any(r["layers"] and r["model"] for r in gpu_rows):
            result["failures"].append(f"{name}: llama.cpp put no model buffer on a GPU device")
        for r in gpu_rows:
            if r["llama_cpp"] and abs(r["planned"] - r["llama_cpp"]) > PLAN_TOLERANCE * r["llama_cpp"]:
                result["failures"].append(f"{name}: plan {r['planned'] / MiB:.1f} MiB vs llama.cpp "
                                          f"{r['llama_cpp'] / MiB:.1f} MiB on {r['device']}")
        if run["text"] != cpu["text"] and (mean > KL_MEAN_BOUND or worst > KL_MAX_BOUND):
            result["failures"].append(f"{name}: KL mean {mean:.4f} / max {worst:.4f} above "
                                      f"{KL_MEAN_BOUND} / {KL_MAX_BOUND}")
    if args.speed and len(result["runs"]) > 1:
        print(f"tok/s CPU {cpu['tok_s']} vs GPU (all) {result['runs'][1].get('tok_s')} at 1 and 8 sequences")
    result["ok"] = result["ok"] and not result["failures"]
    for failure in result["failures"]:
        print(f"FAILED: {failure}")
    print("GPU CHECK", "OK" if result["ok"] else "FAILED", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    return 0 if result["ok"] else 1


def report(run: dict, cpu: dict) -> None:
    print(f"\n[{run['label']}] n_gpu_layers {run['n_gpu_layers']} ({run['backend']})")
    print(f"  {'device':<10} {'layers':>6} {'plan MiB':>9} {'llama.cpp MiB':>14} {'model':>8} {'KV':>8} "
          f"{'compute':>8} {'free after load':>16} {'free, full pool':>16}")
    for r in run["devices"]:
        ratio = f" ({r['planned'] / r['llama_cpp']:.3f}x)" if r["llama_cpp"] and r["device"] != "CPU" else ""
        print(f"  {r['device']:<10} {r['layers']:>6} {r['planned'] / MiB:>9.1f} {r['llama_cpp'] / MiB:>14.1f}"
              f" {r['model'] / MiB:>8.1f} {r['kv'] / MiB:>8.1f} {r['compute'] / MiB:>8.1f}"
              f" {r['free_after_load'] / MiB:>16.0f} {r['free_full_pool'] / MiB:>16.0f}{ratio}")
    print(f"  greedy GPU: {run['text'][:100]!r}")
    print(f"  greedy CPU: {cpu['text'][:100]!r}")
    print(f"  same first {run['same_prefix_chars']} characters; next-token KL mean {run['kl_mean']:.5f}, "
          f"max {run['kl_max']:.5f} nats over {run['kl_positions']} positions (largest log-prob difference "
          f"{run['max_logprob_diff']:.4f}); top-1 agreement {run['top1_agreement']:.1%}")
    print(f"  seconds: {run['seconds']}", flush=True)


# Run; on a crash (the program stopped on a signal, so no exit code was set), print the
# native stack of every thread, then let the signal go on so Python's faulthandler prints
# the Python stack too. A clean exit skips both.
GDB_SCRIPT = """set pagination off
handle SIGPIPE nostop noprint
set $_exitcode = -999
run
if $_exitcode == -999
  thread apply all bt 30
  continue
end
"""


def debugger(python_cmd: list[str], out: Path) -> list[str]:
    """The command under gdb (or cuda-gdb) in batch mode: a crash prints a native backtrace."""
    gdb = shutil.which("gdb") or shutil.which("cuda-gdb")
    if not gdb:
        return python_cmd
    script = out / "gdb-commands.txt"
    script.write_text(GDB_SCRIPT)
    return [gdb, "-q", "-batch", "-return-child-result", "-x", str(script), "--args", *python_cmd]


def device(args) -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import gpu_plugin

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    print(f"installing the {args.gpu} plug-in: {gpu_plugin.install(args.gpu)}", flush=True)
    models = args.models or ["smollm2", "gemma3", "qwen-coder"]
    env = {**os.environ, "PYTHONFAULTHANDLER": "1", "PYTHONUNBUFFERED": "1"}
    failed = []
    for model in models:
        name = Path(model).stem.replace(":", "_")
        cmd = [sys.executable, str(Path(__file__).resolve()), "check", model, "--layers", args.layers,
               "--threads", str(args.threads), "--poll", str(args.poll), "--ctx", str(args.ctx), "--parallel", str(args.parallel),
               "--max-tokens", str(args.max_tokens), "--json", str(out / f"{name}.json")]
        cmd += ([] if args.fill_pool else ["--no-fill"]) + (["--crash-test"] if args.crash_test else [])
        cmd += (["--speed"] if args.speed else []) + (["--gpu-memory", args.gpu_memory] if args.gpu_memory else [])
        log = out / f"{name}.log"
        wrapped = debugger(cmd, out)
        print(f"\n== {model} ({Path(wrapped[0]).name}) -> {log}", flush=True)
        with log.open("w") as f:
            proc = subprocess.run(wrapped, env=env, stdout=f, stderr=subprocess.STDOUT, timeout=args.timeout)
        text = log.read_text(errors="replace")
        print(text[-6000:] if proc.returncode else "\n".join(
            line for line in text.splitlines() if not line.startswith(("[New Thread", "[Thread", "[Inferior"))))
        if proc.returncode:
            failed.append(f"{model} (exit {proc.returncode}; backtrace in {log})")
    print("\nDEVICE CHECK", "OK" if not failed else "FAILED: " + "; ".join(failed))
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("check", help="check one model on the GPU devices llama.cpp reports")
    c.add_argument("model", help="a catalog alias, installed model or .gguf path")
    d = sub.add_parser("device", help="the lent-GPU script: build the plug-in, check each model under a debugger")
    d.add_argument("models", nargs="*", help="models to check (default: the catalog's three)")
    d.add_argument("--gpu", default="cuda", choices=["cuda", "vulkan"])
    d.add_argument("--out", default=os.environ.get("OUT", "gpu-check-out"), help="folder for logs and JSON")
    d.add_argument("--timeout", type=float, default=900, help="seconds per model")
    for q in (c, d):
        q.add_argument("--layers", default="all,half",
                       help="GPU layer settings to check: all, half, auto (the plan's) or numbers")
        q.add_argument("--gpu-memory", help="cap each device's memory for the plan, e.g. 120MiB")
        q.add_argument("--threads", type=int, default=min(8, os.cpu_count() or 2))
        q.add_argument("--poll", type=int, default=50,
                       help="CPU threads' spin before sleeping (0 where the GPU is software and shares the CPU)")
        q.add_argument("--ctx", type=int, default=2048)
        q.add_argument("--parallel", type=int, default=4)
        q.add_argument("--max-tokens", type=int, default=32)
        q.add_argument("--speed", action="store_true", help="also tok/s at 1 and 8 sequences, GPU vs CPU")
        q.add_argument("--crash-test", action="store_true", help=argparse.SUPPRESS)
        q.add_argument("--no-fill", dest="fill_pool", action="store_false",
                       help="skip filling the KV pool (a software GPU reports no memory change for it)")
    c.add_argument("--json", help="write the results here")
    args = p.parse_args(argv)
    return check(args) if args.cmd == "check" else device(args)


if __name__ == "__main__":
    sys.exit(main())
