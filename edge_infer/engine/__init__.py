"""The only room that talks to llama.cpp for inference. Public API below."""

from edge_infer.engine.grammar_check import GrammarError, validate_gbnf
from edge_infer.engine.sampling import SamplingParams
from edge_infer.engine.sequence import Request
from edge_infer.engine.stats import EngineSnapshot, RequestStats
from edge_infer.engine.stream import Completion, FinishEvent, RequestStream, TokenEvent


def __getattr__(name):
    # Engine imports llama_cpp (slow, native): load it only when asked for.
    if name in ("Engine", "BadRequestError"):
        from edge_infer.engine import engine
        return getattr(engine, name)
    if name == "quantize_file":
        from edge_infer.engine.quantize import quantize_file
        return quantize_file
    raise AttributeError(name)


__all__ = ["Engine", "BadRequestError", "quantize_file", "Request", "SamplingParams", "Completion",
           "FinishEvent", "RequestStream", "TokenEvent", "GrammarError", "validate_gbnf",
           "EngineSnapshot", "RequestStats"]
