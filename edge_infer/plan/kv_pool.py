"""The size of the KV pool all slots share (--kv-budget), in cells.

One unified llama.cpp KV cache serves every sequence; its size is a memory budget, not
ctx x slots. A sequence takes cells as it grows (up to ctx); the scheduler admits a request
only when its prompt fits and preempts the youngest when the pool runs out (engine/kv_pool.py).
"""

from __future__ import annotations

import re

from edge_infer.errors import EdgeInferError
from edge_infer.units import GiB, MiB

CELL_STEP = 256          # llama.cpp pads its KV cache to 256 cells
# Default pool: two full contexts, whatever the slot count. Before the pool, every slot
# reserved a full context (4096 x 4 = 16,384 cells); sequences rarely all reach ctx, and when
# they do the youngest is preempted instead of anything failing.
DEFAULT_POOL_CONTEXTS = 2

_BUDGET = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(mib|mb|m|gib|gb|g|cells?|c)?\s*$", re.IGNORECASE)


def parse_kv_budget(text: str) -> tuple[int | None, int | None]:
    """'256MiB' / '1GiB' / '256' (MiB) -> (bytes, None); '8192cells' -> (None, cells).
    Raises EdgeInferError with the flag named for anything else, zero or negative."""
    m = _BUDGET.match(text or "")
    if not m:
        raise EdgeInferError(f"--kv-budget {text!r}: give a size like 256MiB, 1GiB or 8192cells")
    value, unit = float(m.group(1)), (m.group(2) or "mib").lower()
    if value <= 0:
        raise EdgeInferError(f"--kv-budget {text!r}: the pool must hold at least one cell")
    if unit.startswith("c"):
        if value != int(value):
            raise EdgeInferError(f"--kv-budget {text!r}: cells are counted in whole numbers")
        return None, int(value)
    return int(value * (GiB if unit.startswith("g") else MiB)), None


def pool_cells(budget: str, ctx: int, parallel: int, bytes_per_cell: float) -> int:
    """Cells in the shared pool: from --kv-budget, else DEFAULT_POOL_CONTEXTS x ctx (never more
    than ctx x parallel, which is all the slots could ever hold). A multiple of 256, at least 256.

    bytes_per_cell: KV bytes of one token over the full-attention layers (MemoryEstimate.
    kv_bytes_per_token); a sliding-window model's window caches are sized apart, by llama.cpp.
    """
    if budget:
        size, cells = parse_kv_budget(budget)
        if cells is not None:  # padded up, as llama.cpp pads n_ctx
            return max(CELL_STEP, -(-cells // CELL_STEP) * CELL_STEP)
        cells = int(size // max(1.0, bytes_per_cell))  # a memory budget: never above it
        if cells < CELL_STEP:
            raise EdgeInferError(
                f"--kv-budget {budget}: holds {cells} cells, less than llama.cpp's minimum of "
                f"{CELL_STEP} ({CELL_STEP * bytes_per_cell / MiB:.1f} MiB for this model)")
        return cells // CELL_STEP * CELL_STEP
    cells = ctx * min(parallel, DEFAULT_POOL_CONTEXTS)
    return max(CELL_STEP, -(-cells // CELL_STEP) * CELL_STEP)
