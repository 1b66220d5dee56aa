"""llama.cpp's llama_model_quantize on one file, with per-tensor progress read from its log.

The engine room owns every llama.cpp call; the store decides what to make and installs
it (store/quantize.py), handing this function in as its quantizer.
"""

from __future__ import annotations

import os
import re
import threading
from pathlib import Path

from edge_infer.engine.native.llama import capture_log, init_backend
from edge_infer.errors import QuantizeError
from edge_infer.gguf import quant_types
from edge_infer.gguf.info import read_model_info
from edge_infer.gguf.widen import Progress

# llama.cpp logs one line per tensor: "[  12/ 272]  blk.0.attn_q.weight - [ 576, 576, 1, 1], ..."
_TENSOR_LINE = re.compile(r"\[\s*(\d+)\s*/\s*(\d+)\s*\]\s+(\S+)")


def quantize_file(source: Path, dest: Path, target: str, *, threads: int | None = None,
                  allow_requantize: bool = False, progress: Progress | None = None) -> Path:
    """Run llama_model_quantize source -> dest (written to a hidden temp name, then renamed)."""
    import ctypes

    import llama_cpp

    tq = quant_types.lookup(target)
    if tq is None or tq.ftype is None:
        raise QuantizeError(f"unknown quantization level {target!r}")
    read_model_info(source)  # llama.cpp aborts on some broken files: check first
    init_backend(gpus=False)  # quantizing runs on the CPU
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.parent / f".{dest.name}.{os.getpid()}.quantizing"
    params = llama_cpp.llama_model_quantize_default_params()
    params.nthread = threads or 0
    params.ftype = tq.ftype
    params.allow_requantize = allow_requantize
    result: dict = {}

    def work():
        result["rc"] = llama_cpp.llama_model_quantize(str(source).encode(), str(tmp).encode(),
                                                      ctypes.byref(params))

    try:
        with capture_log() as lines:
            worker = threading.Thread(target=work, name="edge-infer-quantize", daemon=True)
            worker.start()
            seen = 0
            while worker.is_alive():
                worker.join(0.2)
                seen = _report(lines, seen, progress)
            _report(lines, seen, progress)
        if result.get("rc") != 0 or not tmp.is_file():
            tail = " ".join(l.strip() for l in lines[-5:] if l.strip())
            raise QuantizeError(f"llama.cpp could not quantize {source.name} to {tq.name}: {tail or 'no reason given'}")
        read_model_info(tmp)  # the output is a whole, readable GGUF
        os.replace(tmp, dest)
    finally:
        tmp.unlink(missing_ok=True)
    return dest


def _report(lines: list[str], seen: int, progress: Progress | None) -> int:
    n = len(lines)
    if progress is None:
        return n
    for line in lines[seen:n]:
        m = _TENSOR_LINE.search(line)
        if m:
            progress(int(m.group(1)), int(m.group(2)), m.group(3))
    return n
