"""EngineDouble: every member of edge_infer.engine.ServedEngine, inert. A test's stand-in for
a loaded engine subclasses it and sets what its test is about (tests/engine/test_served_engine.py
checks that every double still is a ServedEngine)."""

from __future__ import annotations

from collections import deque
from pathlib import Path
from types import SimpleNamespace

from edge_infer.config import EngineSettings


class EngineDouble:
    name = "double"
    settings = EngineSettings()
    info = SimpleNamespace(architecture="llama", context_length=2048, block_count=1)
    template = None  # no chat template with tools: tool calls are read Hermes-style
    placement = SimpleNamespace(n_gpu_layers=0, tensor_split=(), describe=lambda: "CPU only")
    plan = SimpleNamespace(cpu_bytes=0, gpu_bytes=0, kv_bytes_per_token=0)
    backend = None
    model = SimpleNamespace(n_vocab=0, path=Path("/models/double.gguf"), piece=lambda token, special=False: b"",
                            detokenize=lambda tokens, special=False: "",
                            tokenize=lambda text, add_special, parse_special=True: list(text.encode()))
    prompts = SimpleNamespace(infill_tokens=lambda prefix, suffix, prompt="", extra=(): [1, 2, 3])
    n_ctx_seq = 2048
    state = "ok"
    embedding_bytes = 0
    embedding_size = 0
    embedding_tokens = 512
    can_rerank = False

    def __init__(self):
        self.recent: deque = deque(maxlen=200)

    def submit(self, request):
        raise NotImplementedError(type(self).__name__)

    def generate(self, request):
        raise NotImplementedError(type(self).__name__)

    def tokenize(self, text: str) -> list[int]:
        return list(text.encode())

    def tokenize_messages(self, messages, tools=None) -> list[int]:
        return self.tokenize("".join(m.get("content") or "" for m in messages))

    def embed(self, inputs, *, normalize=True, dimensions=None):
        raise NotImplementedError(type(self).__name__)

    def rerank(self, query, documents):
        raise NotImplementedError(type(self).__name__)

    def snapshot(self):
        return SimpleNamespace(slots_busy=0, queued=0, devices=())

    def close(self) -> None:
        pass
