"""The memory plan: what a model costs (weights, KV, compute), what this machine has
(RAM, GPUs), and the settings and verdicts that follow (GPU layers, context, slots,
fits / tight / does not fit). Reads GGUF headers (edge_infer.gguf); knows nothing of
the engine or the store, which both use it."""

from edge_infer.plan.estimate import (MIN_CTX_STEP, EstimateInputs, MemoryEstimate, estimate, estimate_memory,
                                      max_context)
from edge_infer.plan.fit import (FITS, NO_FIT, TIGHT, Fit, MemoryPlan, default_ctx, device_split,
                                 engine_estimate_kwargs, fit_verdict, plan_for, plan_memory, plan_settings, verdict)
from edge_infer.plan.machine import (Device, GpuDevice, Machine, detect_machine, offload_devices, parse_nvidia_smi,
                                     query_nvidia_gpus)

__all__ = [
    "MIN_CTX_STEP", "EstimateInputs", "MemoryEstimate", "estimate", "estimate_memory", "max_context",
    "FITS", "NO_FIT", "TIGHT", "Fit", "MemoryPlan", "default_ctx", "engine_estimate_kwargs",
    "fit_verdict", "plan_for", "plan_memory", "plan_settings", "verdict", "device_split",
    "Device", "offload_devices", "GpuDevice", "Machine", "detect_machine", "parse_nvidia_smi", "query_nvidia_gpus",
]
