"""edge-infer: offline LLM inference on llama.cpp with continuous batching."""

__version__ = "0.1.0"
