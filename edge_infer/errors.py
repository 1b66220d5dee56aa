"""Errors a user sees. Each message says what is wrong and what to do."""


class EdgeInferError(Exception):
    """Base: the CLI prints these without a traceback."""


class ModelFileError(EdgeInferError):
    """A model file is missing, truncated or not GGUF. Raised before llama.cpp sees it."""


class ModelNotFoundError(EdgeInferError):
    """A model name that is neither an installed model, a catalog alias, nor a file."""


class ProvisionError(EdgeInferError):
    """Fetching a model from its package mirror failed (network, checksum, layout)."""


class ContextOverflowError(EdgeInferError):
    """A prompt that does not fit the context window."""

    def __init__(self, prompt_tokens: int, n_ctx: int, remedy: str = "raise --ctx"):
        self.prompt_tokens = prompt_tokens
        self.n_ctx = n_ctx
        super().__init__(
            f"prompt is {prompt_tokens} tokens but the context holds {n_ctx} "
            f"(at least one token must be left to generate); shorten the prompt or {remedy}"
        )


class QuantizeError(EdgeInferError):
    """A quantization that is refused (with the reason) or that llama.cpp failed."""


class QueueFullError(EdgeInferError):
    """More requests waiting than the engine's queue allows."""


class EngineClosedError(EdgeInferError):
    """The engine was shut down."""


class WorkerError(EdgeInferError):
    """An RPC worker (`edge-infer worker`) that does not answer, or not as one: a 503 for a
    request whose model needs it (the worker may come back)."""
