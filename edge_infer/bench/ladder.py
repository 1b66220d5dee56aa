"""The quant ladder: every installed quant level of one model, measured the same way.

For each level, one at a time (two llama.cpp thread teams would fight for the cores):
load time, RSS added by the model, prefill and decode speed, perplexity over a fixed
English text that ships with Python (`pydoc_data.topics`), and KL divergence of the
next-token distributions from the highest-precision level, with how often both pick
the same top token. One request evaluates it all: the first quarter of the tokens is
the prompt (prefill), the rest are forced one by one (decode) with the full
log-softmax captured at every position (Request.forced_tokens + capture_logprobs).
"""

from __future__ import annotations

import hashlib
import json
import math
import platform
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

import numpy as np

TEXT_TOPIC = "execmodel"   # "Execution model": plain English prose, ~2000 tokens


def eval_text() -> tuple[str, str]:
    """(text, where it comes from). Fixed for a given Python version; the JSON records
    the version and the text's sha256 so ladders from other machines compare honestly."""
    from pydoc_data.topics import topics

    return topics[TEXT_TOPIC], f"pydoc_data.topics[{TEXT_TOPIC!r}] (Python {platform.python_version()})"


@dataclass
class LadderRow:
    label: str
    quant: str
    path: str
    file_size: int
    bits_per_weight: float
    load_s: float
    rss_bytes: int             # process RSS added while the model was loaded and evaluated
    prefill_tok_s: float
    decode_tok_s: float
    perplexity: float
    kl_mean: float | None      # vs the reference level; None for the reference itself
    kl_p99: float | None
    top1_agree: float | None   # share of positions where both levels' top token is the same
    reference: bool = False


@dataclass
class Ladder:
    model: str
    text_source: str
    text_sha256: str
    n_tokens: int
    prompt_tokens: int
    threads: int
    created_at: str
    rows: list[LadderRow] = field(default_factory=list)
    kind: str = "weights"      # "weights": quant levels of the model; "kv": KV cache types of one file

    def to_dict(self) -> dict:
        return asdict(self)


def _kl_and_top1(ref: list[np.ndarray], cur: list[np.ndarray]) -> tuple[float, float, float]:
    kls, same = [], 0
    for r, c in zip(ref, cur):
        r64, c64 = r.astype(np.float64), c.astype(np.float64)
        p = np.exp(r64)
        kls.append(max(0.0, float(np.sum(p * (r64 - c64)))))
        same += int(np.argmax(r) == np.argmax(c))
    arr = np.array(kls)
    return float(arr.mean()), float(np.percentile(arr, 99)), same / max(1, len(ref))


def _score(row: "LadderRow", logprobs, ref_logprobs):
    """The first row is the reference; later ones get KL and top-1 against it. Returns the reference."""
    if ref_logprobs is None:
        return logprobs
    row.kl_mean, row.kl_p99, row.top1_agree = _kl_and_top1(ref_logprobs, logprobs)
    return ref_logprobs


def evaluate(path: Path, settings, *, tokens: list[int] | None = None, text: str = "",
             n_tokens: int = 512, proc=None):
    """Load `path`, run the evaluation request, close. Without `tokens`, `text` is
    tokenized by this model (its first n_tokens). Returns (row fields, tokens, logprobs)."""
    import psutil

    from edge_infer.engine import Engine, Request, SamplingParams

    proc = proc or psutil.Process()
    rss0 = proc.memory_info().rss
    t0 = time.perf_counter()
    engine = Engine(path, settings)
    load_s = time.perf_counter() - t0
    try:
        if tokens is None:
            tokens = engine.tokenize(text)[:n_tokens]
        if engine.model.n_vocab <= max(tokens):
            raise ValueError(f"{Path(path).name} has a smaller vocabulary than the reference level")
        prompt_n = max(1, len(tokens) // 4)
        forced = tokens[prompt_n:]
        # max_tokens=None: the default cap (256) would cut the scored text short.
        done = engine.generate(Request(prompt_tokens=tokens[:prompt_n], forced_tokens=forced,
                                       sampling=SamplingParams(max_tokens=None),
                                       capture_logprobs=True, source="ladder"))
        if done.error:
            raise RuntimeError(done.error)
        if len(done.logprobs) != len(forced):
            raise RuntimeError(f"scored {len(done.logprobs)} of {len(forced)} positions")
        rss = max(0, proc.memory_info().rss - rss0)
    finally:
        engine.close()
    nll = -sum(float(lp[t]) for lp, t in zip(done.logprobs, forced))
    ppl = math.exp(nll / max(1, len(forced)))
    st = done.stats
    return dict(load_s=load_s, rss_bytes=rss, prefill_tok_s=st.prefill_tok_s,
                decode_tok_s=st.decode_tok_s, perplexity=ppl), tokens, done.logprobs


def run_ladder(models: list, *, n_tokens: int = 512, threads: int | None = None,
               say: Callable[[str], object] = print) -> Ladder:
    """`models`: InstalledModels of one model, any order; the highest precision is the
    reference. Each is loaded, evaluated and closed before the next."""
    from edge_infer.config import EngineSettings
    from edge_infer.gguf.info import read_model_info
    from edge_infer.gguf.quant_types import precision_key

    if not models:
        raise ValueError("no models to compare")
    models = sorted(models, key=lambda m: (precision_key(m.quant), m.size), reverse=True)
    text, source = eval_text()
    settings = EngineSettings.from_env(ctx=n_tokens + 64, parallel=1, n_batch=512, disk_cache="0",
                                       **({"n_threads": threads} if threads else {}))
    ladder = Ladder(model=models[0].family, text_source=source,
                    text_sha256=hashlib.sha256(text.encode()).hexdigest(), n_tokens=0,
                    prompt_tokens=0, threads=settings.n_threads,
                    created_at=datetime.now(timezone.utc).isoformat(timespec="seconds"))
    tokens = None          # tokenized once, by the reference level: every level sees the same ids
    ref_logprobs = None
    for i, m in enumerate(models):
        say(f"[{i + 1}/{len(models)}] {m.label}: loading and evaluating ...")
        fields, tokens, logprobs = evaluate(m.path, settings, tokens=tokens, text=text, n_tokens=n_tokens)
        ladder.n_tokens, ladder.prompt_tokens = len(tokens), max(1, len(tokens) // 4)
        info = read_model_info(m.path)
        row = LadderRow(label=m.label, quant=m.quant, path=str(m.path), file_size=m.size,
                        bits_per_weight=m.size * 8 / max(1, info.parameter_count),
                        kl_mean=None, kl_p99=None, top1_agree=None, reference=i == 0, **fields)
        ref_logprobs = _score(row, logprobs, ref_logprobs)
        del logprobs
        ladder.rows.append(row)
    return ladder


def parse_kv_types(spec) -> list[str]:
    """`f16,q8_0` (or a list) -> ['f16', 'q8_0'], order kept, repeats dropped. Raises
    EdgeInferError (one line, naming --kv-types) for an unknown type or an empty list."""
    from edge_infer.errors import EdgeInferError
    from edge_infer.plan.kv_types import KV_TYPES

    names = spec.split(",") if isinstance(spec, str) else list(spec)
    out: list[str] = []
    for name in (n.strip().lower() for n in names):
        if not name or name in out:
            continue
        if name not in KV_TYPES:
            raise EdgeInferError(f"--kv-types {name!r}: unknown KV cache type (choose from {', '.join(KV_TYPES)})")
        out.append(name)
    if not out:
        raise EdgeInferError(f"--kv-types: no KV cache types given (choose from {', '.join(KV_TYPES)})")
    return out


def run_kv_ladder(path, kv_types=("f16", "q8_0", "q4_0"), *, n_tokens: int = 512,
                  threads: int | None = None, model: str | None = None,
                  say: Callable[[str], object] = print) -> Ladder:
    """One model file, evaluated once per KV cache type (K and V both set to it); the
    first type is the reference. Same text and token ids for every row."""
    from dataclasses import replace

    from edge_infer.config import EngineSettings
    from edge_infer.gguf.info import read_model_info
    from edge_infer.plan.kv_types import check_kv_types

    path = Path(path)
    kv_types = parse_kv_types(kv_types)
    info = read_model_info(path)
    text, source = eval_text()
    base = EngineSettings.from_env(ctx=n_tokens + 64, parallel=1, n_batch=512, disk_cache="0",
                                   **({"n_threads": threads} if threads else {}))
    if base.flash_attn == "auto" and any(t not in ("f16", "bf16") for t in kv_types):
        base = replace(base, flash_attn="on")  # quantized V needs it; the same for every row
    for t in kv_types:  # refuse before loading anything
        check_kv_types(t, t, base.flash_attn)
    ladder = Ladder(model=model or info.name or path.stem, text_source=source,
                    text_sha256=hashlib.sha256(text.encode()).hexdigest(), n_tokens=0,
                    prompt_tokens=0, threads=base.n_threads, kind="kv",
                    created_at=datetime.now(timezone.utc).isoformat(timespec="seconds"))
    size = path.stat().st_size
    tokens, ref_logprobs = None, None
    for i, kv in enumerate(kv_types):
        say(f"[{i + 1}/{len(kv_types)}] KV {kv}: loading and evaluating ...")
        settings = replace(base, cache_type_k=kv, cache_type_v=kv)
        fields, tokens, logprobs = evaluate(path, settings, tokens=tokens, text=text, n_tokens=n_tokens)
        ladder.n_tokens, ladder.prompt_tokens = len(tokens), max(1, len(tokens) // 4)
        row = LadderRow(label=f"KV {kv}", quant=kv, path=str(path), file_size=size,
                        bits_per_weight=size * 8 / max(1, info.parameter_count),
                        kl_mean=None, kl_p99=None, top1_agree=None, reference=i == 0, **fields)
        ref_logprobs = _score(row, logprobs, ref_logprobs)
        del logprobs
        ladder.rows.append(row)
    return ladder


def ladder_path(model: str) -> Path:
    """Where the last ladder of a model is kept (for the app's charts)."""
    import re

    from edge_infer import paths

    slug = re.sub(r"[^a-z0-9._-]+", "-", model.lower()).strip("-.") or "model"
    return paths.data_dir() / "ladders" / f"{slug}.json"


def save(ladder: Ladder, path: Path | None = None) -> Path:
    import os

    path = Path(path) if path else ladder_path(ladder.model)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(ladder.to_dict(), indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return path


def format_table(ladder: Ladder) -> str:
    from edge_infer.units import human_bytes

    ref = next((r for r in ladder.rows if r.reference), None)
    kv = ladder.kind == "kv"
    what = f"{ladder.model} ({Path(ladder.rows[0].path).name}), KV cache types" if kv and ladder.rows else ladder.model
    head = (f"{what}: {ladder.n_tokens} tokens of {ladder.text_source}, first {ladder.prompt_tokens} "
            f"as the prompt; {ladder.threads} threads; KL and top-1 vs {ref.quant if ref else '-'}")
    cols = ["KV" if kv else "QUANT", "SIZE", "BPW", "LOAD", "RSS", "PREFILL t/s", "DECODE t/s", "PPL", "KL mean", "KL p99", "TOP-1"]
    rows = []
    for r in ladder.rows:
        rows.append([
            r.quant, human_bytes(r.file_size), f"{r.bits_per_weight:.2f}", f"{r.load_s:.2f}s", human_bytes(r.rss_bytes),
            f"{r.prefill_tok_s:.0f}", f"{r.decode_tok_s:.1f}", f"{r.perplexity:.3f}",
            "ref" if r.reference else f"{r.kl_mean:.4f}", "" if r.reference else f"{r.kl_p99:.4f}",
            "" if r.reference else f"{100 * r.top1_agree:.1f}%",
        ])
    widths = [max(len(c), *(len(row[i]) for row in rows)) for i, c in enumerate(cols)]
    lines = [head, "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cols, widths)))]
    for row in rows:
        lines.append("  ".join(v.ljust(w) if i == 0 else v.rjust(w) for i, (v, w) in enumerate(zip(row, widths))))
    return "\n".join(lines)
