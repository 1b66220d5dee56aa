"""`edge-infer inspect MODEL`: what a GGUF file is and what it will cost to run,
from its header alone (no weights read), and which llama.cpp CPU backend would run it."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict

from edge_infer.config import EngineSettings
from edge_infer.units import human_bytes, human_count


def register(subparsers) -> None:
    p = subparsers.add_parser("inspect", help="show a model's architecture, size and memory needs",
                              description="Read a model's GGUF header and estimate its memory use.")
    p.add_argument("model", help="installed model name, catalog alias or path to a .gguf file")
    p.add_argument("--ctx", type=int, help="context per sequence (default: min(4096, trained context))")
    p.add_argument("--parallel", type=int, default=1, help="sequences decoded together (default 1)")
    p.add_argument("--n-gpu-layers", type=int,
                   help="layers to place on GPU devices in the estimate (default: as many as fit)")
    p.add_argument("--gpu-memory", metavar="SIZE", help="use at most this much of each GPU device")
    p.add_argument("--rpc", metavar="HOST:PORT,...",
                   help="place layers on these workers too (where each layer would go) (`edge-infer worker` on other machines)")
    p.add_argument("--n-batch", type=int, help="tokens per decode step (default 512)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    p.set_defaults(func=run)


def plan_table(info, est, ctx: int, parallel: int, disk_cap: int = 0) -> str:
    n_swa = sum(info.swa_layers)
    window = (f"{info.sliding_window} tokens on {n_swa} of {info.block_count} layers"
              if n_swa else ("none" if not info.sliding_window else f"{info.sliding_window} (not used)"))
    rows = [
        ("architecture", info.architecture),
        ("parameters", human_count(info.parameter_count)),
        ("quantization", info.quantization),
        ("file size", human_bytes(info.file_size)),
        ("trained context", f"{info.context_length} tokens"),
        ("layers", str(info.block_count)),
        ("attention heads", f"{info.head_count} (KV heads {info.head_count_kv}, "
                            f"head size {info.key_length})"),
        ("embedding width", str(info.embedding_length)),
        ("vocabulary", str(info.vocab_size)),
        ("sliding window", window),
        ("chat template", "yes" if info.chat_template else "no"),
    ]
    seqs = f"{parallel} sequence{'s' if parallel != 1 else ''}"
    mem = [
        ("weights", human_bytes(est.weights_bytes)),
        ("KV pool", f"{human_bytes(est.kv_bytes)}  ({est.n_ctx} cells, {human_bytes(est.kv_bytes_per_token)}/token)"),
        ("compute", f"{human_bytes(est.compute_resident_bytes + est.output_bytes)}  "
                    f"({human_bytes(est.compute_bytes)} reserved)"),
        ("runtime", human_bytes(est.runtime_bytes)),
        ("prompt cache", f"up to {human_bytes(est.prompt_cache_bytes)}"),
        ("total", human_bytes(est.total_bytes)),
        ("disk cache", f"up to {human_bytes(disk_cap)} on disk (~{human_bytes(est.kv_bytes_per_token)}/token saved)"
                       if disk_cap else "off"),
    ]
    if est.gpu_bytes:
        mem.append(("on GPU", f"{human_bytes(est.gpu_bytes)} ({est.gpu_layers} layers"
                              f"{' + output' if est.output_on_gpu else ''})"))
    width = max(len(k) for k, _ in rows + mem)
    lines = [f"{info.name}  ({info.path})"]
    lines += [f"  {k:<{width}}  {v}" for k, v in rows]
    lines.append(f"memory at {ctx} tokens x {seqs}:")
    lines += [f"  {k:<{width}}  {v}" for k, v in mem]
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from edge_infer.engine.devices.devices import this_machine
    from edge_infer.engine.native.llama import init_backend
    from edge_infer.engine.devices.placement import gpu_memory_cap
    from edge_infer.gguf.info import read_model_info
    from edge_infer.plan import engine_estimate_kwargs, estimate_memory, plan_for
    from edge_infer.store.store import ModelStore

    path = ModelStore().resolve(args.model)
    info = read_model_info(path)
    from edge_infer.commands.common import rpc_endpoints

    settings = EngineSettings.from_env(parallel=args.parallel, n_gpu_layers=args.n_gpu_layers,
                                       n_batch=args.n_batch, gpu_memory=args.gpu_memory,
                                       rpc=rpc_endpoints(args.rpc))
    ctx = args.ctx or min(settings.ctx, info.context_length or settings.ctx)
    engine_options = engine_estimate_kwargs(settings)  # as the engine would create its context
    backend = init_backend()  # loads ggml's backend libraries only, no model
    machine = this_machine(settings.rpc).capped(gpu_memory_cap(settings.gpu_memory))
    plan = plan_for(info, settings, machine, ctx=args.ctx, parallel=args.parallel)
    est = estimate_memory(info, ctx, settings.parallel, n_gpu_layers=plan.n_gpu_layers,
                          split=plan.split or (1.0,), **engine_options)
    if args.json:
        memory = {"ctx": ctx, "parallel": settings.parallel, **est.to_dict(), "disk_cache_bytes": _disk_cap(settings)}
        print(json.dumps({"model": info.to_dict(), "memory": memory,
                          "plan": {**plan.to_dict(), "machine": machine.describe()},
                          "devices": [asdict(d) for d in machine.gpus],
                          "backend": backend.as_dict()}, indent=2))
    else:
        print(plan_table(info, est, ctx, settings.parallel, _disk_cap(settings)))
        print(_plan_lines(plan, machine))
        print(backend_lines(backend))
    return 0


def _disk_cap(settings: EngineSettings) -> int:
    from edge_infer.paths import kv_cache_dir
    from edge_infer.plan.cache_sizes import disk_cache_bytes

    return disk_cache_bytes(settings.disk_cache, kv_cache_dir())


def backend_lines(b) -> str:
    """The llama.cpp backend of this process: CPU variant, buffer types, devices."""
    others = [v for v in b.variants_available if v != b.variant]
    return "\n".join([
        f"llama.cpp backend: CPU variant {b.variant}"
        + (f" (also in this build: {', '.join(others)})" if others else ""),
        f"  CPU: {b.cpu_model or 'unknown'}; {' '.join(b.cpu_flags) or 'no SIMD flags read'}",
        f"  extra buffer types: {', '.join(b.extra_bufts_offered) or 'none'}, {b.extra_bufts_reason}",
        f"  devices: {', '.join(b.devices) or 'none'}",
        *(f"  {name} not loaded: {why}" for name, why in b.gpu_plugins_skipped.items()),
    ])


def _plan_lines(plan, machine) -> str:
    """What the memory planner picks for this machine (the same plan `serve` uses), and
    where each byte goes: a row per device."""
    head = "plan for this machine" if plan.fits else "does not fit this machine"
    lines = [f"{head}: ctx {plan.ctx} x {plan.parallel}, {plan.n_gpu_layers} of {plan.n_layer_slots} "
             f"layers on GPU devices", f"  ({machine.describe()})"]
    budgets = dict(zip(plan.devices, plan.device_budgets))
    for device, layers, used in plan.placement():
        usable = budgets.get(device, plan.ram_budget)
        lines.append(f"  {device:<10} {layers:>3} of {plan.n_layer_slots} layers  {human_bytes(used):>10}"
                     f"  of {human_bytes(usable)} usable")
    lines += [f"  {note}" for note in plan.notes]
    return "\n".join(lines)
