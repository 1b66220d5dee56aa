"""The only room that talks to llama.cpp for inference. Public API below."""

from edge_infer.engine.grammar_check import GrammarError, validate_gbnf
from edge_infer.engine.sampling import SamplingParams
from edge_infer.engine.sequence import Request
from edge_infer.engine.stats import EngineSnapshot, RequestStats
from edge_infer.engine.stream import Completion, FinishEvent, RequestStream, TokenEvent
from edge_infer.engine import toolcalls  # noqa: F401  tool-call parsers: toolcalls.parser_for(...)
from edge_infer.engine.tool_grammar import (HERMES, WRAPPERS, CallWrapper, ToolGrammarError,
                                            tool_call_continuation, tool_call_grammar)
from edge_infer.engine.tool_prompt import template_supports_tools
from edge_infer.engine.chat_template import RESERVED as TEMPLATE_RESERVED


def __getattr__(name):
    # Engine imports llama_cpp (slow, native): load it only when asked for.
    if name in ("Engine", "BadRequestError"):
        from edge_infer.engine import engine
        return getattr(engine, name)
    if name in ("list_devices", "this_machine"):
        from edge_infer.engine import devices
        return getattr(devices, name)
    if name == "place":
        from edge_infer.engine.placement import place
        return place
    if name == "quantize_file":
        from edge_infer.engine.quantize import quantize_file
        return quantize_file
    raise AttributeError(name)


__all__ = ["Engine", "BadRequestError", "quantize_file", "list_devices", "this_machine", "place",
           "Request", "SamplingParams", "Completion",
           "FinishEvent", "RequestStream", "TokenEvent", "GrammarError", "validate_gbnf",
           "EngineSnapshot", "RequestStats", "tool_call_grammar", "tool_call_continuation", "CallWrapper",
           "HERMES", "WRAPPERS", "ToolGrammarError", "template_supports_tools", "TEMPLATE_RESERVED"]
