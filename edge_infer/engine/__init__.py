"""The only room that talks to llama.cpp for inference. Public API below."""

from edge_infer.engine.sampling import SamplingParams
from edge_infer.engine.sequence import Request
from edge_infer.engine.stream import Completion, FinishEvent, RequestStream, TokenEvent


def __getattr__(name):
    # Engine imports llama_cpp (slow, native): load it only when asked for.
    if name in ("Engine", "BadRequestError"):
        from edge_infer.engine import engine
        return getattr(engine, name)
    raise AttributeError(name)


__all__ = ["Engine", "BadRequestError", "Request", "SamplingParams", "Completion",
           "FinishEvent", "RequestStream", "TokenEvent"]
