"""Where a model's layers go: the memory plan applied to llama.cpp's devices at load.

`n_gpu_layers=None` (the default) offloads as many layers as the devices' budgets hold,
as llama-server and Ollama do; a number is kept (clamped to the model), and refused with
the numbers when the plan puts more on a device than it has free: llama.cpp would fail
half-way through the load. With several devices, the plan's split (each device's budget)
goes to llama.cpp as its tensor_split, so the layers land where the plan says.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from edge_infer.errors import EdgeInferError
from edge_infer.gguf.info import ModelInfo
from edge_infer.plan import MemoryPlan, plan_for
from edge_infer.plan.machine import Machine
from edge_infer.units import human_bytes, parse_size

log = logging.getLogger("edge_infer.placement")


@dataclass(frozen=True)
class Placement:
    n_gpu_layers: int                # what llama.cpp gets
    tensor_split: tuple[float, ...]  # per device, for llama.cpp; () = one device or none
    plan: MemoryPlan

    def describe(self) -> str:
        """One line: 'CPU: 0 layers, 12 MiB; Vulkan0: 31 layers, 280 MiB'."""
        return "; ".join(f"{d}: {n} layers, {human_bytes(b)}" for d, n, b in self.plan.placement())


def gpu_memory_cap(text: str) -> int | None:
    """--gpu-memory: at most this much on each device ('' = what it has free)."""
    if not text:
        return None
    try:
        return parse_size(text, "--gpu-memory")
    except ValueError as exc:
        raise EdgeInferError(str(exc)) from None


def place(info: ModelInfo, settings, machine: Machine | None = None, *, warn: bool = True) -> Placement:
    """The plan for these settings on this machine's devices; raises EdgeInferError (one
    line, with the numbers) when asked-for layers cannot fit a device. warn=False for a
    plan that only previews a load (memory budgets, the Load dialog): the load warns."""
    s = settings
    asked = s.n_gpu_layers
    if asked is not None and asked < -1:
        raise EdgeInferError(f"--n-gpu-layers must be -1 (all), 0 (CPU only) or a layer count, not {asked}")
    cap = gpu_memory_cap(s.gpu_memory)
    if machine is None:
        from edge_infer.engine.devices.devices import this_machine

        # --n-gpu-layers 0 asks for the CPU only: no GPU plug-in (and its driver) loads for it.
        machine = this_machine(s.rpc, gpus=asked != 0)
    machine = machine.capped(cap)
    if warn and asked and not machine.devices:
        from edge_infer.engine.devices.devices import missing_plugin_hint

        log.warning("--n-gpu-layers %d: no GPU device, every layer stays on the CPU (%s)", asked, missing_plugin_hint())
    # Auto leaves a tenth of each device free (other programs, the driver); a number the
    # user gave may use all of it.
    plan = plan_for(info, s, machine, n_gpu_layers=asked)
    for note in plan.notes if warn else ():
        if "--n-gpu-layers" in note:
            log.warning(note)
    if asked:
        for device, need in zip(machine.devices, plan.estimate.device_bytes):
            if need > device.free_bytes:
                raise EdgeInferError(
                    f"{info.name or 'the model'} with {plan.n_gpu_layers} layers offloaded needs "
                    f"{human_bytes(need)} on {device.name}, which has {human_bytes(device.free_bytes)} free"
                    f"{' (--gpu-memory)' if cap else ''}: use fewer --n-gpu-layers, or leave it out "
                    "and the plan offloads what fits")
    split = plan.split if len(plan.devices) > 1 else ()
    return Placement(plan.n_gpu_layers, split, plan)


def load_model(path, placement: Placement, load_log: list[str]):
    """LlamaModel with the placement's layers and split. A load llama.cpp refuses with layers
    on a device (out of its memory, most often) is one line naming the devices and the plan."""
    from edge_infer.engine.native.llama import LlamaModel, ModelLoadError

    try:
        return LlamaModel(path, n_gpu_layers=placement.n_gpu_layers, tensor_split=placement.tensor_split)
    except ModelLoadError:
        if not placement.plan.devices or not placement.n_gpu_layers:
            raise
        said = next((line.strip() for line in reversed(load_log)
                     if "alloc" in line or "memory" in line or "failed" in line), "")
        raise EdgeInferError(f"llama.cpp could not load {path.name} as planned ({placement.describe()})"
                             + (f": {said}" if said else "")
                             + "; try fewer --n-gpu-layers or --gpu-memory below the device's free memory") from None
