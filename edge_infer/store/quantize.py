"""`edge-infer quantize` in the store: which levels to make from which file, refusals
before anything is written, and each made level recorded as an installed model.

The file itself is written by a quantizer handed in by the caller (the engine room's
quantize_file: llama.cpp), and F16 widening by edge_infer.gguf.widen; the store never
imports the engine.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from edge_infer.errors import QuantizeError
from edge_infer.gguf import quant_types
from edge_infer.gguf.info import read_model_info
from edge_infer.gguf.widen import Progress, widen_to_f16

# quantizer(source, dest, level, threads=, allow_requantize=, progress=) -> dest
Quantizer = Callable[..., Path]

__all__ = ["QuantizeError", "Refusal", "check_direction", "QuantizePlan", "plan_quantize", "run_quantize"]


@dataclass(frozen=True)
class Refusal:
    reason: str


def check_direction(source_quant: str, target: str, *, allow_requantize: bool) -> Refusal | None:
    """Why quantizing `source_quant` -> `target` is refused, or None when it may go ahead.

    Quantizing from an already quantized file compounds two rounding errors, and going
    to a higher precision makes a bigger file that cannot be more accurate than its
    source. Both are refused unless the user asks for them.
    """
    tq = quant_types.lookup(target)
    if tq is None or tq.ftype is None:
        known = ", ".join(n for n, q in quant_types.QUANT_TYPES.items() if q.ftype is not None)
        return Refusal(f"{target!r} is not a quantization level llama.cpp can produce; choose from {known}")
    if tq.name in quant_types.NEEDS_IMATRIX:
        return Refusal(f"{tq.name} needs an importance matrix (llama-imatrix), which edge-infer does "
                       f"not compute; pick Q2_K or a larger level")
    if allow_requantize:
        return None
    src = quant_types.canonical(source_quant)
    if quant_types.bits_per_weight(tq.name) > quant_types.bits_per_weight(src) and src != "F32":
        return Refusal(
            f"{src} -> {tq.name} goes from lower to higher precision: the result would be larger "
            f"({quant_types.bits_per_weight(tq.name):.1f} vs {quant_types.bits_per_weight(src):.1f} bits "
            f"per weight) but no more accurate than the {src} file it comes from, because rounding "
            f"that already happened cannot be undone. Quantize from the F16/BF16 original instead "
            f"(`edge-infer quants REPO` lists the levels a repo has); --from-f16 widens {src} to F16 "
            f"first to compare formats on one model; --allow-requantize makes the file anyway")
    if quant_types.is_quantized(src):
        return Refusal(
            f"the source is already quantized ({src}); quantizing it again to {tq.name} adds a "
            f"second rounding on top of the first, so the result is worse than a {tq.name} made "
            f"from the original weights. Use the F16/BF16 original, or pass --from-f16 to widen "
            f"{src} to F16 first (for comparing levels: the {src} rounding stays in every level), "
            f"or --allow-requantize to do it anyway")
    return None



# ---- store entries: what `edge-infer quantize` does ---------------------------------------

@dataclass
class QuantizeStep:
    quant: str
    dest: Path
    allow_requantize: bool


@dataclass
class QuantizePlan:
    source_path: Path
    source_quant: str
    identity: dict                 # alias / repo / name the new entries share with the source
    source_label: str
    widen_to: Path | None = None   # write an F16 here first (and record it)
    f16_path: Path | None = None   # quantize from this F16 (widened or already installed)
    steps: list[QuantizeStep] = field(default_factory=list)
    skipped: list = field(default_factory=list)    # InstalledModels of levels already there
    notes: list[str] = field(default_factory=list)
    bytes_needed: int = 0


def plan_quantize(spec: str, targets: list[str], *, from_f16: bool = False, allow_requantize: bool = False,
                  force: bool = False, store=None) -> QuantizePlan:
    """Check every requested level before anything is written: refusals come all at once."""
    from edge_infer.store.download import check_disk_space
    from edge_infer.gguf.quant_types import canonical, model_stem
    from edge_infer.store.store import ModelStore, looks_like_path

    store = store or ModelStore()
    source = None if looks_like_path(spec) else store.find(spec)
    path = source.path if source else store.resolve(spec)
    info = read_model_info(path)
    src_quant = canonical(source.quant if source else info.quantization)
    if source:
        identity = {"alias": source.alias, "repo": source.repo, "name": source.name}
        label = source.label
    else:
        identity = {"alias": None, "repo": None, "name": model_stem(path.name)}
        label = path.name
    stem = model_stem(path.name)
    pseudo = source or _Identity(**identity)
    family = {canonical(m.quant): m for m in store.family(source)} if source else {}
    notes: list[str] = []

    wanted = list(dict.fromkeys(canonical(t) for t in targets))
    if not wanted:
        raise QuantizeError("--to needs at least one level, e.g. --to Q8_0,Q4_K_M")
    widen = from_f16 and quant_types.is_quantized(src_quant)
    if from_f16 and not widen:
        notes.append(f"{label} is already {src_quant}; --from-f16 has nothing to widen")
    base_quant = "F16" if widen else src_quant
    refusals = []
    for q in wanted:
        why = check_direction(base_quant, q, allow_requantize=allow_requantize)
        if why:
            refusals.append(f"{q}: {why.reason}")
    if refusals:
        raise QuantizeError("refusing to quantize " + label + ":\n  " + "\n  ".join(refusals))
    if widen:
        above = [q for q in wanted if quant_types.bits_per_weight(q) > quant_types.bits_per_weight(src_quant)]
        if above:
            notes.append(f"{', '.join(above)} will be made from F16 widened from {src_quant}: they "
                         f"cannot be more accurate than {src_quant} itself; they show what each "
                         f"format costs, which is what a ladder compares")

    plan = QuantizePlan(source_path=path, source_quant=src_quant, identity=identity, source_label=label,
                        notes=notes)
    if widen:
        have = family.get("F16")
        if have is not None and not force:
            plan.f16_path = have.path
            notes.append(f"quantizing from the installed {have.label}")
        else:
            plan.widen_to = store.folder_for_model(pseudo, "F16") / f"{stem}.F16.gguf"
            plan.f16_path = plan.widen_to
            plan.bytes_needed += info.parameter_count * 2
    for q in wanted:
        if q == src_quant and not widen:
            notes.append(f"{q} is the source's own level; skipped")
            continue
        if q == "F16" and widen:
            continue  # the widening makes it
        if q in family and not force:
            plan.skipped.append(family[q])
            continue
        allow = allow_requantize and quant_types.is_quantized(base_quant)
        plan.steps.append(QuantizeStep(q, store.folder_for_model(pseudo, q) / f"{stem}.{q}.gguf", allow))
        plan.bytes_needed += int(info.parameter_count * quant_types.bits_per_weight(q) / 8)
    check_disk_space(store.root, plan.bytes_needed, f"the new quant levels of {label}")
    return plan


@dataclass
class _Identity:
    alias: str | None
    repo: str | None
    name: str


def run_quantize(plan: QuantizePlan, *, quantizer: Quantizer, threads: int | None = None,
                 progress: Callable[[str], Progress] | None = None,
                 say: Callable[[str], object] = print, store=None) -> list:
    """Carry out a plan with `quantizer` (edge_infer.engine.quantize_file); each finished
    level is recorded at once (a later failure keeps it)."""
    from edge_infer.store.store import ModelStore

    store = store or ModelStore()
    made = []

    def record(path: Path, quant: str, derived: str):
        digest = hashlib.sha256()
        with open(path, "rb") as fh:
            while chunk := fh.read(1 << 22):
                digest.update(chunk)
        return store.record(path, quant=quant, source="quantize", sha256=digest.hexdigest(),
                            derived_from=derived, **plan.identity)

    if plan.widen_to is not None:
        say(f"widening {plan.source_label} ({plan.source_quant}) to F16 with the gguf package")
        t0 = time.perf_counter()
        widen_to_f16(plan.source_path, plan.widen_to, progress=progress("F16") if progress else None)
        made.append(record(plan.widen_to, "F16", plan.source_label))
        say(f"  F16 written in {time.perf_counter() - t0:.1f}s")
    src = plan.f16_path or plan.source_path
    for step in plan.steps:
        t0 = time.perf_counter()
        quantizer(src, step.dest, step.quant, threads=threads, allow_requantize=step.allow_requantize,
                      progress=progress(step.quant) if progress else None)
        derived = plan.source_label if src == plan.source_path else f"F16 from {plan.source_label}"
        made.append(record(step.dest, step.quant, derived))
        say(f"  {step.quant} written in {time.perf_counter() - t0:.1f}s")
    return made
