"""Flags shared by commands that load a model: engine settings and sampling."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from edge_infer.config import EngineSettings
from edge_infer.engine.sampling import SamplingParams
from edge_infer.plan.kv_types import KV_TYPES


def add_model_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", nargs="?", default=None,
                   help="installed model name, catalog alias (smollm2, gemma3) or path to a .gguf "
                        "(default: the catalog's default model)")


def add_engine_args(p: argparse.ArgumentParser, parallel_default: int | None = None) -> None:
    g = p.add_argument_group("engine")
    g.add_argument("--ctx", type=int, help="context per sequence, in tokens (default 4096)")
    g.add_argument("--parallel", type=int, default=parallel_default,
                   help="slots: requests decoded together, all sharing one KV pool"
                        + (f" (default {parallel_default})" if parallel_default else ""))
    g.add_argument("--threads", type=int, help="CPU threads (default: physical cores)")
    g.add_argument("--no-follow-load", dest="follow_load", action="store_false", default=None,
                   help="keep --poll while other programs keep the cores busy (default: the CPU workers "
                        "then sleep at once instead of spinning, and spin again when the load is gone)")
    g.add_argument("--n-gpu-layers", type=int,
                   help="layers offloaded to GPU devices (default: as many as fit; 0 = CPU only; -1 = all)")
    g.add_argument("--gpu-memory", metavar="SIZE",
                   help="use at most this much of each GPU device, e.g. 6GiB (default: what it has free)")
    g.add_argument("--rpc", metavar="HOST:PORT,...",
                   help="place layers on these workers too (other machines running `edge-infer worker`), "
                        "by the memory each reports; the model then runs in a process of its own")
    g.add_argument("--n-batch", type=int, help="tokens per decode step (default 512)")
    g.add_argument("--poll", type=int, metavar="0-100",
                   help="CPU worker threads spin this much before sleeping (default 50, as llama-server; "
                        "-1 = no persistent threadpool)")
    g.add_argument("--kv-split", dest="kv_unified", action="store_false", default=None,
                   help="give each slot its own KV buffer instead of one shared buffer")
    g.add_argument("--flash-attn", choices=["auto", "on", "off"], help="flash attention (default auto)")
    g.add_argument("--cache-type-k", choices=KV_TYPES, help="KV cache type for keys (default f16)")
    g.add_argument("--cache-type-v", choices=KV_TYPES,
                   help="KV cache type for values (default f16; a quantized type needs flash attention)")
    g.add_argument("--kv-budget", metavar="SIZE",
                   help="KV pool shared by all slots: 256MiB, 1GiB or 8192cells (a bare number is MiB; "
                        "default: the memory plan's)")
    g.add_argument("--prompt-cache-mib", type=int, metavar="MIB",
                   help="RAM kept for KV states of conversations that lost their slot (default -1 = auto: "
                        "a tenth of the RAM free at load, 256 MiB to 8 GiB; 0 = off)")
    g.add_argument("--disk-cache", metavar="SIZE",
                   help="disk kept for KV states of conversations (evicted from RAM, or left when a model "
                        "unloads or the process stops), restored on their next turn: 2GiB; 0 = off "
                        "(default: 4 GiB, at most a tenth of the free disk; in ~/.cache/edge-infer/kv)")
    g.add_argument("--draft-max", type=int, metavar="N",
                   help="n-gram speculation: draft up to N tokens per step from the prompt and the text "
                        "so far, verified in the same batch; same output, faster on repetitive text "
                        "(default 15; 0 = off; a request may set 'speculative')")
    g.add_argument("--reasoning-budget", type=int, metavar="N",
                   help="reasoning tokens a reply may write in its <think> block before the engine closes "
                        "it and the model answers (default -1 = no limit; 0 = answer at once)")
    g.add_argument("--chat-template-file", metavar="FILE",
                   help="a Jinja chat template to use instead of the model's own (e.g. one with tool "
                        "or thinking support)")
    g.add_argument("--request-timeout", type=int, metavar="S",
                   help="end any request still running S seconds after it was submitted (default 600; 0 = never)")
    g.add_argument("--stall-timeout", type=float, metavar="S",
                   help="declare the engine stalled when one llama.cpp step runs S seconds: every "
                        "request ends with 503, /health says so (default 300; 0 = off)")


def add_sampling_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("sampling")
    g.add_argument("--temperature", "--temp", type=float, default=0.8)
    g.add_argument("--top-k", type=int, default=40)
    g.add_argument("--top-p", type=float, default=0.95)
    g.add_argument("--min-p", type=float, default=0.05)
    g.add_argument("--repeat-penalty", type=float, default=1.0)
    g.add_argument("--seed", type=int, default=None)
    g.add_argument("--max-tokens", "-n", type=int, default=256)
    g.add_argument("--stop", action="append", default=[], help="stop string (repeatable)")


def check_cache_sizes(settings: EngineSettings) -> None:
    from edge_infer.paths import kv_cache_dir
    from edge_infer.plan.cache_sizes import disk_cache_bytes, prompt_cache_bytes

    prompt_cache_bytes(settings.prompt_cache_mib, ram_available=0)
    disk_cache_bytes(settings.disk_cache, kv_cache_dir(), disk_free=0)


def engine_settings(args, **overrides) -> EngineSettings:
    values = dict(ctx=args.ctx, parallel=args.parallel, n_threads=args.threads,
                  follow_load=getattr(args, "follow_load", None),
                  n_gpu_layers=args.n_gpu_layers, gpu_memory=getattr(args, "gpu_memory", None),
                  n_batch=args.n_batch, kv_unified=args.kv_unified,
                  poll=getattr(args, "poll", None),
                  flash_attn=args.flash_attn, cache_type_k=getattr(args, "cache_type_k", None),
                  cache_type_v=getattr(args, "cache_type_v", None), kv_budget=getattr(args, "kv_budget", None),
                  prompt_cache_mib=getattr(args, "prompt_cache_mib", None),
                  disk_cache=getattr(args, "disk_cache", None),
                  draft_max=getattr(args, "draft_max", None), request_timeout=getattr(args, "request_timeout", None),
                  stall_timeout=getattr(args, "stall_timeout", None),
                  reasoning_budget=getattr(args, "reasoning_budget", None),
                  chat_template=getattr(args, "chat_template_file", None),
                  rpc=rpc_endpoints(getattr(args, "rpc", None)))
    values.update(overrides)
    settings = EngineSettings.from_env(**values)
    check_cache_sizes(settings)  # before a model loads for seconds, only to fail on a flag
    return settings


def rpc_endpoints(value: str | None) -> tuple[str, ...] | None:
    from edge_infer.engine.devices.rpc import parse_endpoints

    return parse_endpoints(value) or None


def sampling_params(args) -> SamplingParams:
    return SamplingParams(temperature=args.temperature, top_k=args.top_k, top_p=args.top_p,
                          min_p=args.min_p, repeat_penalty=args.repeat_penalty, seed=args.seed,
                          max_tokens=args.max_tokens, stop=tuple(args.stop))


def resolve_model(spec: str | None) -> tuple[Path, str]:
    """Model spec -> (path, display name); None is the catalog default, provisioned if missing."""
    from edge_infer.store.store import ModelStore

    # Progress to stderr: stdout carries the model's text.
    return ModelStore().locate(spec, progress=lambda m: print(m, file=sys.stderr))


def open_host(args, **overrides):
    """A model host with args.model loaded (use it as a context manager: it closes the engine)."""
    from edge_infer.host import ModelHost

    host = ModelHost()
    host.load(args.model, engine_settings(args, **overrides))
    return host
