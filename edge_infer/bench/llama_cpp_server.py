"""`python -m llama_cpp.server` as `loadtest --compare` starts it, after edge-infer's backend
set-up: a portable llama.cpp needs its CPU backend loaded before the first model, and on an
AMX CPU the baseline must skip the same crashing buffer types as the engine does."""

import runpy
import sys

from edge_infer.engine.native.llama import init_backend
from edge_infer.errors import EdgeInferError

if __name__ == "__main__":
    try:
        init_backend()
    except EdgeInferError as exc:
        sys.exit(f"edge-infer: {exc}")
    runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)
