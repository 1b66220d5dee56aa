"""Which models may stay in memory: the budget, each model's footprint from its memory
plan, and which idle models to unload (least recently used first) so a new one fits.

Pure decisions, no engines: the host asks, tests check them with made-up numbers.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from edge_infer.units import human_bytes

if TYPE_CHECKING:
    from edge_infer.engine import ServedEngine

RAM_SHARE = 0.9  # of the RAM available when the host starts; the rest is for everything else


@dataclass(frozen=True)
class Footprint:
    """What one loaded model holds: its memory plan (weights + KV pool + compute + prompt cache)."""
    ram: int
    vram: int = 0

    def __add__(self, other: "Footprint") -> "Footprint":
        return Footprint(self.ram + other.ram, self.vram + other.vram)

    def __str__(self) -> str:
        return human_bytes(self.ram) + (f" RAM + {human_bytes(self.vram)} VRAM" if self.vram else "")


NOTHING = Footprint(0, 0)


@dataclass(frozen=True)
class Budget:
    """How much all loaded models together may plan for; max_models 0 = no count limit."""
    ram: int
    vram: int = 0
    max_models: int = 0

    def holds(self, used: Footprint, count: int) -> bool:
        return (used.ram <= self.ram and used.vram <= self.vram
                and (not self.max_models or count <= self.max_models))

    def __str__(self) -> str:
        parts = [f"{human_bytes(self.ram)} RAM"]
        if self.vram:
            parts.append(f"{human_bytes(self.vram)} VRAM")
        if self.max_models:
            parts.append(f"at most {self.max_models} model{'s' * (self.max_models != 1)}")
        return ", ".join(parts)


def machine_budget(ram_bytes: int | None = None, max_models: int = 0) -> Budget:
    """The default budget: a share of the RAM (and VRAM) free now, or `ram_bytes`."""
    from edge_infer.engine.devices.devices import this_machine

    machine = this_machine()  # RAM and llama.cpp's GPU devices
    ram = ram_bytes if ram_bytes is not None else int(machine.ram_available * RAM_SHARE)
    vram = int(machine.gpu_free * RAM_SHARE)
    return Budget(ram=ram, vram=vram, max_models=max_models)


def plan_footprint(path: Path, settings) -> Footprint:
    """The memory plan of `path` loaded with `settings`, placed on this machine's devices as
    the engine will place it (engine/devices/placement.py). Memory on an integrated GPU is RAM."""
    from edge_infer.engine.devices.placement import place
    from edge_infer.gguf.info import read_model_info

    plan = place(read_model_info(path), settings, warn=False).plan
    return Footprint(plan.estimate.cpu_bytes, local_gpu_bytes(plan))


def local_gpu_bytes(plan) -> int:
    """The plan's bytes on this machine's GPUs: not what it places on RPC workers (llama.cpp
    names their devices RPC0, RPC1, ...), which other machines hold."""
    est = plan.estimate
    if not est.device_bytes:
        return est.gpu_bytes
    return sum(n for d, n in zip(plan.devices, est.device_bytes) if not d.startswith("RPC"))


def engine_footprint(engine: ServedEngine) -> Footprint:
    """What a loaded engine holds: its memory plan, plus its embedding context once used
    (llama.cpp computes every token's logits there)."""
    plan = getattr(engine.placement, "plan", None)  # the tests' doubles have none
    vram = local_gpu_bytes(plan) if plan is not None else engine.plan.gpu_bytes
    return Footprint(engine.plan.cpu_bytes + engine.embedding_bytes, vram)


@dataclass(frozen=True)
class Candidate:
    """A loaded model as eviction sees it."""
    name: str
    footprint: Footprint
    last_used: float
    evictable: bool  # idle and not pinned


def choose_evictions(loaded: list[Candidate], need: Footprint, budget: Budget) -> list[str] | None:
    """Names to unload, least recently used first, so that `need` fits beside the rest;
    [] when it fits already, None when it cannot fit until a busy model goes idle."""
    used = sum((c.footprint for c in loaded), NOTHING)
    count = len(loaded)
    victims: list[str] = []
    for c in sorted((c for c in loaded if c.evictable), key=lambda c: c.last_used):
        after = used + need
        if budget.holds(after, count + 1):
            break
        # Only unload what helps: a CPU-only model frees no VRAM.
        helps = ((after.ram > budget.ram and c.footprint.ram) or (after.vram > budget.vram and c.footprint.vram)
                 or (budget.max_models and count + 1 > budget.max_models))
        if not helps:
            continue
        victims.append(c.name)
        used = Footprint(used.ram - c.footprint.ram, used.vram - c.footprint.vram)
        count -= 1
    return victims if budget.holds(used + need, count + 1) else None


def fits_alone(need: Footprint, budget: Budget) -> bool:
    return budget.holds(need, 1)
