"""GGUF files read without llama.cpp: the header parser (local files and ranged remote
reads), what a model is (ModelInfo) and the quantization levels. A leaf room: it imports
nothing of edge-infer but errors and units, and store, plan and engine all read it."""

from edge_infer.gguf.info import ModelInfo, read_model_info
from edge_infer.gguf.limits import GGUFLimitError

__all__ = ["GGUFLimitError", "ModelInfo", "read_model_info"]
