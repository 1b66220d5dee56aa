"""GGUF header -> ModelInfo: what a model is and how big its parts are.

Everything the memory planner and `inspect` need comes from here, read from the
header alone (milliseconds), and only after gguf.header proved the file whole.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from gguf.constants import LlamaFileType

from edge_infer.errors import ModelFileError
from edge_infer.gguf.header import GGUFHeader, SkippedArray, read_header
from edge_infer.gguf.limits import LLAMA_MAX_LAYERS, GGUFLimitError, meta_uint

# Layers per sliding-window period when the file has no
# `<arch>.attention.sliding_window_pattern`: llama.cpp's defaults per architecture
# (src/models/<arch>.cpp, load_swa_pattern). In a period of n the last layer is
# full attention, the rest slide; "dense first" flips that (first layer full).
_SWA_PATTERN = {
    "gemma2": 2, "gemma3": 6, "gemma-embedding": 6, "gemma3n": 5, "cohere2": 4,
    "exaone4": 4, "llama4": 4, "gpt-oss": 2, "olmo2": 4, "plamo3": 8, "afmoe": 4,
    "mellum": 4, "phi3": 1,
}
_SWA_DENSE_FIRST = {"smallthinker": 4, "cohere2moe": 4, "modern-bert": 3, "laguna": 4}
_LAYER_RE = re.compile(r"^blk\.(\d+)\.")


@dataclass(frozen=True)
class ModelInfo:
    path: str
    file_size: int
    architecture: str
    name: str
    parameter_count: int
    quantization: str
    context_length: int          # trained context (tokens)
    block_count: int             # transformer layers
    head_count: int
    head_count_kv: int           # max over layers when the file gives one per layer
    embedding_length: int
    feed_forward_length: int     # max over layers when the file gives one per layer
    key_length: int              # per head
    value_length: int
    sliding_window: int          # 0 = no sliding-window attention
    swa_layers: tuple[bool, ...]  # per layer: True = sliding window, False = full attention
    layer_head_count_kv: tuple[int, ...]
    vocab_size: int
    chat_template: str | None
    bos_token_id: int | None
    eos_token_id: int | None
    weights_bytes: int           # every tensor in the file
    layer_weight_bytes: tuple[int, ...]  # blk.N.* per layer
    input_weight_bytes: int      # token_embd.* (llama.cpp keeps these on the CPU)
    output_weight_bytes: int     # every other non-layer tensor (output, output_norm, ...)
    metadata: dict[str, Any] = field(default_factory=dict, compare=False, hash=False, repr=False)

    @property
    def tied_embeddings(self) -> bool:
        """No output.weight: llama.cpp reuses token_embd as the output projection."""
        return "output.weight" not in self.metadata.get("_tensor_names", ())

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out.pop("metadata")
        for key in ("swa_layers", "layer_head_count_kv", "layer_weight_bytes"):
            out[key] = list(out[key])
        return out


def _quant_name(header: GGUFHeader) -> str:
    file_type = header.fields.get("general.file_type")
    if isinstance(file_type, int):
        try:
            name = LlamaFileType(file_type).name
            return name.removeprefix("MOSTLY_").removeprefix("ALL_")
        except ValueError:
            pass
    # No (known) file type: name it after the type most matrices use; 1-D tensors
    # (norms, biases) are F32 in every quantization and would always win.
    counts = Counter(t.type.name for t in header.tensors if len(t.shape) >= 2)
    return counts.most_common(1)[0][0] if counts else "unknown"


def _per_layer(fields: dict[str, Any], key: str, n_layer: int, default: int) -> tuple[int, ...]:
    """One number per layer: the file's array (as long as the layers), one number for every
    layer, or the default. Each must be an integer in u32's range, as llama.cpp reads it."""
    value = fields.get(key)
    if isinstance(value, tuple) and len(value) == n_layer:
        return tuple(meta_uint({key: v}, key) for v in value)
    if value is not None and not isinstance(value, (tuple, SkippedArray)):
        return (meta_uint(fields, key),) * n_layer
    return (default,) * n_layer


def _swa_layers(arch: str, fields: dict[str, Any], n_layer: int, n_swa: int) -> tuple[bool, ...]:
    if n_swa <= 0:
        return (False,) * n_layer
    pattern = fields.get(f"{arch}.attention.sliding_window_pattern")
    if isinstance(pattern, tuple) and len(pattern) == n_layer:  # explicit per-layer flags
        return tuple(bool(p) for p in pattern)
    dense_first = arch in _SWA_DENSE_FIRST
    n = pattern if isinstance(pattern, int) else _SWA_PATTERN.get(arch, _SWA_DENSE_FIRST.get(arch))
    if n is None:
        # llama.cpp ignores the window for architectures it does not know to slide;
        # counting full attention over-estimates memory, which is the safe side.
        return (False,) * n_layer
    if dense_first:
        return tuple(n == 0 or il % n != 0 for il in range(n_layer))
    return tuple(n == 0 or il % n < n - 1 for il in range(n_layer))


def info_from_header(path: str | os.PathLike, header: GGUFHeader) -> ModelInfo:
    """The ModelInfo a header describes; a number the planner would use that is not a sane
    integer (a layer count past llama.cpp's 512, a text for a length) is a GGUFLimitError."""
    try:
        return _describe(path, header)
    except GGUFLimitError as exc:
        raise exc.at(str(path)) from None


def _describe(path: str | os.PathLike, header: GGUFHeader) -> ModelInfo:
    f = header.fields
    arch = str(f.get("general.architecture", "unknown"))

    def key(name: str, default: int = 0) -> int:  # a number the planner uses, checked
        return meta_uint(f, f"{arch}.{name}", default)

    n_layer = meta_uint(f, f"{arch}.block_count", 0, LLAMA_MAX_LAYERS)  # lists below are this long
    n_embd = key("embedding_length")
    head_counts = _per_layer(f, f"{arch}.attention.head_count", n_layer, 0)
    n_head = max(head_counts, default=0)
    kv_counts = _per_layer(f, f"{arch}.attention.head_count_kv", n_layer, n_head)
    head_dim = n_embd // n_head if n_head else 0
    n_swa = key("attention.sliding_window")

    layer_bytes = [0] * n_layer
    input_bytes = output_bytes = 0
    for t in header.tensors:
        m = _LAYER_RE.match(t.name)
        if m and int(m.group(1)) < n_layer:
            layer_bytes[int(m.group(1))] += t.n_bytes
        elif t.name.startswith("token_embd"):
            input_bytes += t.n_bytes
        else:
            output_bytes += t.n_bytes

    tokens = f.get("tokenizer.ggml.tokens")
    vocab = key("vocab_size") or (len(tokens) if isinstance(tokens, (tuple, SkippedArray)) else 0)
    template = f.get("tokenizer.chat_template")
    metadata = {k: v for k, v in f.items() if not isinstance(v, SkippedArray)}
    metadata["_tensor_names"] = frozenset(t.name for t in header.tensors)

    return ModelInfo(
        path=str(Path(path)),
        file_size=header.file_size,
        architecture=arch,
        name=str(f.get("general.name") or Path(path).stem),
        parameter_count=sum(t.n_elements for t in header.tensors),
        quantization=_quant_name(header),
        context_length=key("context_length"),
        block_count=n_layer,
        head_count=n_head,
        head_count_kv=max(kv_counts, default=0),
        embedding_length=n_embd,
        feed_forward_length=max(_per_layer(f, f"{arch}.feed_forward_length", n_layer, 0), default=0),
        key_length=key("attention.key_length", head_dim),
        value_length=key("attention.value_length", head_dim),
        sliding_window=n_swa,
        swa_layers=_swa_layers(arch, f, n_layer, n_swa),
        layer_head_count_kv=kv_counts,
        vocab_size=vocab,
        chat_template=template if isinstance(template, str) else None,
        bos_token_id=f.get("tokenizer.ggml.bos_token_id"),
        eos_token_id=f.get("tokenizer.ggml.eos_token_id"),
        weights_bytes=sum(t.n_bytes for t in header.tensors),
        layer_weight_bytes=tuple(layer_bytes),
        input_weight_bytes=input_bytes,
        output_weight_bytes=output_bytes,
        metadata=metadata,
    )


def split_paths(path: str | os.PathLike) -> list[Path]:
    """Every shard of a split GGUF given its first ("x-00001-of-00003.gguf"), else [path]."""
    from edge_infer.gguf.quant_types import split_info

    path = Path(path)
    info = split_info(path.name)
    if not info or info[1] != 1:
        return [path]
    stem, _, count = info
    return [path.with_name(f"{stem}-{i:05d}-of-{count:05d}.gguf") for i in range(1, count + 1)]


def read_model_info(path: str | os.PathLike) -> ModelInfo:
    """Validate a GGUF file (raises ModelFileError) and describe it. For the first shard
    of a split model every shard is validated and counted (llama.cpp loads them all)."""
    header = read_header(path)
    count = header.fields.get("split.count", 1)
    if isinstance(count, int) and count > 1:
        shards = split_paths(path)
        if len(shards) != count:
            raise ModelFileError(f"{path} is shard {meta_uint(header.fields, 'split.no') + 1} of a {count}-part "
                                 f"model; pass the first shard (…-00001-of-{count:05d}.gguf)")
        rest = [read_header(p) for p in shards[1:]]  # raises "no such model file" for a missing shard
        header = merge_split_headers([header, *rest])
    return info_from_header(path, header)


def merge_split_headers(headers: list[GGUFHeader]) -> GGUFHeader:
    """One header for a split model: metadata from the first shard, every shard's tensors."""
    if len(headers) == 1:
        return headers[0]
    tensors = tuple(t for h in headers for t in h.tensors)
    return replace(headers[0], tensors=tensors, file_size=sum(h.file_size for h in headers))
