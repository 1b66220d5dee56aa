"""The only room that talks to llama.cpp for inference. Public API below."""

from edge_infer.engine.api import ServedEngine, tool_family
from edge_infer.engine.sampling import SamplingParams
from edge_infer.engine.sequence import Request
from edge_infer.engine.stats import EngineSnapshot, RequestStats
from edge_infer.engine.stream import Completion, FinishEvent, RequestStream, TokenEvent


def __getattr__(name):
    # Engine imports llama_cpp (slow, native): load it only when asked for.
    if name in ("Engine", "BadRequestError"):
        from edge_infer.engine import engine
        return getattr(engine, name)
    if name in ("list_devices", "this_machine"):
        from edge_infer.engine.devices import devices
        return getattr(devices, name)
    if name == "place":
        from edge_infer.engine.devices.placement import place
        return place
    if name == "parse_endpoints":  # RPC workers' addresses (engine/devices/rpc.py: pure Python)
        from edge_infer.engine.devices.rpc import parse_endpoints
        return parse_endpoints
    if name == "quantize_file":
        from edge_infer.engine.native.quantize import quantize_file
        return quantize_file
    raise AttributeError(name)


__all__ = ["Engine", "BadRequestError", "quantize_file", "parse_endpoints", "list_devices", "this_machine", "place",
           "Request", "SamplingParams", "Completion",
           "FinishEvent", "RequestStream", "TokenEvent", "EngineSnapshot", "RequestStats", "ServedEngine", "tool_family"]
