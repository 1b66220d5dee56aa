"""ServedEngine: what the host, the server and the TUI may ask of a loaded engine (ollama's
runner held as a typed interface). Engine implements it; so do the tests' doubles."""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from edge_infer.chat.families import Family, family_for_model

if TYPE_CHECKING:
    from edge_infer.chat.template import ChatTemplate
    from edge_infer.config import EngineSettings
    from edge_infer.engine.native.backend import BackendInfo
    from edge_infer.engine.devices.placement import Placement
    from edge_infer.engine.prompt import Prompter
    from edge_infer.engine.sequence import Request
    from edge_infer.engine.stats import EngineSnapshot, FinishedRequest
    from edge_infer.engine.stream import Completion, RequestStream
    from edge_infer.gguf.info import ModelInfo
    from edge_infer.plan.estimate import MemoryEstimate


class Vocabulary(Protocol):
    """The loaded model's tokens as text (logprobs, echo)."""
    n_vocab: int

    def tokenize(self, text: str, add_special: bool, parse_special: bool = True) -> list[int]: ...

    def piece(self, token: int, special: bool = False) -> bytes: ...

    def detokenize(self, tokens: list[int], special: bool = False) -> str: ...


@runtime_checkable
class ServedEngine(Protocol):
    name: str                          # the name it is served under
    settings: EngineSettings
    info: ModelInfo                    # from the GGUF header: architecture, context, sizes
    template: ChatTemplate | None      # the model's chat template (None: it has none)
    placement: Placement               # where its layers and bytes are, per device
    plan: MemoryEstimate               # its memory plan (the host's budget counts it)
    backend: BackendInfo               # the CPU variant and buffer types llama.cpp runs it on
    model: Vocabulary
    prompts: Prompter                  # how requests become tokens: chat template, infill
    n_ctx_seq: int                     # the most tokens one sequence may hold
    recent: deque[FinishedRequest]     # the last finished requests, newest last

    @property
    def state(self) -> str: ...        # ok | stalled | stopped | closed

    @property
    def embedding_bytes(self) -> int: ...

    @property
    def embedding_size(self) -> int: ...     # floats per vector

    @property
    def embedding_tokens(self) -> int: ...   # the longest input one vector takes

    @property
    def can_rerank(self) -> bool: ...

    def submit(self, request: Request) -> RequestStream: ...

    def generate(self, request: Request) -> Completion: ...

    def tokenize(self, text: str) -> list[int]: ...

    def tokenize_messages(self, messages: list[dict], tools: list[dict] | None = None) -> list[int]: ...

    def embed(self, inputs: list[str | list[int]], *, normalize: bool = True,
              dimensions: int | None = None) -> tuple[list[list[float]], int]: ...

    def rerank(self, query: str, documents: list[str]) -> tuple[list[float], int]: ...

    def snapshot(self) -> EngineSnapshot: ...

    def close(self) -> None: ...


def tool_family(engine: ServedEngine | None, forced: bool = False) -> Family:
    """The tool-call family a loaded engine's model writes in (None: no engine, as for a saved
    conversation's model: Hermes). Server and TUI read replies with this one choice."""
    if engine is None:
        return family_for_model(None)
    return family_for_model(engine.template, engine.info.architecture, forced)
