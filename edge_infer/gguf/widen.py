"""Widening a quantized GGUF back to F16 with the gguf package, so an offline ladder can
start from one file.

Widening does not restore precision: F16 made from a Q4_1 file holds exactly the Q4_1
values. It lets every level be produced from one source so that their differences are
the formats' own, which is what a ladder compares.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

from edge_infer.errors import QuantizeError
from edge_infer.gguf.info import read_model_info

# (tensors done, tensors total, tensor name): widening, quantizing and their progress bars share it
Progress = Callable[[int, int, str], object]


def widen_to_f16(source: Path, dest: Path, progress: Progress | None = None) -> Path:
    """Write `source` (any quantization the gguf package can dequantize) as an F16 GGUF:
    every metadata key copied, general.file_type = F16, matrices as F16, 1-D tensors
    (norms, biases) as F32 as llama.cpp itself keeps them."""
    import gguf
    import numpy as np

    read_model_info(source)
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.parent / f".{dest.name}.{os.getpid()}.widening"
    reader = gguf.GGUFReader(str(source), "r")
    arch = reader.fields[gguf.Keys.General.ARCHITECTURE].contents()
    writer = gguf.GGUFWriter(str(tmp), arch=arch, endianess=reader.endianess)
    try:
        align = reader.fields.get(gguf.Keys.General.ALIGNMENT)
        if align is not None:
            writer.data_alignment = int(align.contents())
        for kv in reader.fields.values():
            if kv.name == gguf.Keys.General.ARCHITECTURE or kv.name.startswith("GGUF."):
                continue
            if kv.name == gguf.Keys.General.FILE_TYPE:
                continue
            vtype = kv.types[0]
            sub = kv.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None
            writer.add_key_value(kv.name, kv.contents(), vtype, sub_type=sub)
        writer.add_file_type(gguf.LlamaFileType.MOSTLY_F16)

        def widened(t):
            if t.tensor_type == gguf.GGMLQuantizationType.F32 or len(t.shape) < 2:
                data = gguf.quants.dequantize(t.data, t.tensor_type)
                return np.ascontiguousarray(data, dtype=np.float32)
            if t.tensor_type == gguf.GGMLQuantizationType.F16:
                return t.data
            try:
                data = gguf.quants.dequantize(t.data, t.tensor_type)
            except NotImplementedError:
                raise QuantizeError(f"the gguf package cannot dequantize {t.tensor_type.name} "
                                    f"(tensor {t.name}); widening {source.name} to F16 is not possible") from None
            return data.astype(np.float16)

        tensors = list(reader.tensors)
        for t in tensors:  # declare shapes and sizes first, data follows tensor by tensor
            n = int(np.prod(t.shape))
            wide_f32 = t.tensor_type == gguf.GGMLQuantizationType.F32 or len(t.shape) < 2
            dtype = np.float32 if wide_f32 else np.float16
            shape = tuple(int(d) for d in reversed(t.shape))
            writer.add_tensor_info(t.name, shape, np.dtype(dtype), n * np.dtype(dtype).itemsize)
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_ti_data_to_file()
        for i, t in enumerate(tensors, 1):
            writer.write_tensor_data(widened(t))
            if progress:
                progress(i, len(tensors), t.name)
        writer.close()
        read_model_info(tmp)
        os.replace(tmp, dest)
    finally:
        try:
            writer.close()
        except Exception:  # already closed, or failed before opening
            pass
        tmp.unlink(missing_ok=True)
    return dest
