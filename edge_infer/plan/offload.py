"""What llama.cpp puts on the offload devices: the last N layer slots with their KV, split
across devices as tensor_split says, and the output layer with its compute buffer."""

from __future__ import annotations

from dataclasses import dataclass

from edge_infer.plan.estimate_inputs import EstimateInputs
from edge_infer.plan.kv_layout import KvLayout


@dataclass(frozen=True)
class Offload:
    """What the offload devices hold: layers with their KV, and the output layer with the
    compute buffer of the device that computes the logits."""

    layers: int                  # repeating layers on the devices
    output_on_gpu: bool          # the output layer's slot is offloaded
    output_weights_on_gpu: bool  # ... and its matrix went with it (not refused for its size)
    duplicated: int              # token_embd copied to the device (tied embeddings)
    layer_weights: int
    layer_kv: int
    device_compute: int          # the compute buffer of the device holding the output layer
    output: int                  # the output layer's bytes on its device, compute included
    device_bytes: tuple[int, ...] = ()
    device_layers: tuple[int, ...] = ()

    @property
    def bytes(self) -> int:
        return self.layer_weights + self.layer_kv + self.output


def offload(inputs: EstimateInputs, kv: KvLayout, logits: int) -> Offload:
    """Where the layers, their KV and the output layer go; `logits`: the bytes of one ubatch's logits."""
    info, n_ubatch, kv_span = inputs.info, kv.n_ubatch, kv.span
    n_layer = info.block_count
    n_gpu_layers = inputs.n_gpu_layers
    slots = n_layer + 1 if n_gpu_layers < 0 else min(n_gpu_layers, n_layer + 1)
    first_gpu = n_layer + 1 - slots
    output_on_gpu = slots > 0
    layer_weights = sum(info.layer_weight_bytes[first_gpu:])
    layer_kv = sum(kv.layer_bytes[first_gpu:])
    # llama.cpp places the output matrix where the device supports a 512-row product with it;
    # a device that refuses tensors past max_tensor (Vulkan: maxStorageBufferRange, 128 MiB on
    # llvmpipe) keeps that matrix, and so the logits, on the CPU.
    output_matrix = info.input_weight_bytes if info.tied_embeddings else info.output_weight_bytes
    too_big = inputs.max_tensor and max(output_matrix, 512 * info.vocab_size * 4) > inputs.max_tensor
    output_weights_on_gpu = output_on_gpu and not too_big
    # Tied embeddings: a GPU output layer gets its own copy of token_embd (the input
    # layer always stays on the CPU), so those bytes count twice.
    duplicated = info.input_weight_bytes if output_weights_on_gpu and info.tied_embeddings else 0
    # On a device the whole compute reservation is allocated: its peak, which is the logits
    # (with the residual) where the device computes them, else the layers' activations with
    # the f16 attention masks (one per attention kind). Measured on Vulkan with flash
    # attention: SmolLM2 98.2 MiB (plan 98.25), Gemma 3 23.0 (23.2), Qwen2.5-1.5B 62.5 (62.5).
    masks = (2 if any(info.swa_layers) else 1) * kv_span * n_ubatch * 2
    layer_compute = n_ubatch * (3 * info.feed_forward_length + 2 * info.embedding_length) * 4 + masks
    if not inputs.flash_attn:
        layer_compute += n_ubatch * info.head_count * kv_span * 4
    device_compute = layer_compute
    if output_weights_on_gpu:
        device_compute = max(logits + n_ubatch * 2 * info.embedding_length * 4, layer_compute)
    output = 0
    if output_weights_on_gpu:
        output = info.output_weight_bytes + duplicated + device_compute
    elif output_on_gpu:  # the layers' activations on the device, the logits on the CPU
        output = device_compute
    per_device = [0] * len(inputs.split)
    per_layers = [0] * len(inputs.split)
    for il, dev in enumerate(layer_devices(n_layer, slots, inputs.split)):
        if dev is None:
            continue
        per_layers[dev] += 1
        if il < n_layer:
            per_device[dev] += info.layer_weight_bytes[il] + kv.layer_bytes[il]
        else:  # the output layer, with the compute buffer of the device that computes logits
            per_device[dev] += output
    return Offload(n_layer - min(first_gpu, n_layer), output_on_gpu, output_weights_on_gpu, duplicated,
                   layer_weights, layer_kv, device_compute, output,
                   tuple(per_device) if slots else (), tuple(per_layers) if slots else ())


def layer_devices(n_layer: int, slots: int, split: tuple[float, ...]) -> list[int | None]:
    """Which offload device holds each of the n_layer + 1 layer slots (the output layer is
    the last), None for the CPU: llama.cpp's rule (llama-model.cpp, load_tensors) -- the last
    `slots` go to the devices, cut at the cumulative shares of `split`."""
    total = sum(split) or 1.0
    bounds, acc = [], 0.0
    for share in split:
        acc += share
        bounds.append(acc / total)
    first = n_layer + 1 - slots
    owner: list[int | None] = []
    for il in range(n_layer + 1):
        if il < first or slots == 0:
            owner.append(None)
            continue
        frac = (il - first) / slots
        owner.append(min(next((i for i, b in enumerate(bounds) if b > frac), len(bounds) - 1), len(bounds) - 1))
    return owner

