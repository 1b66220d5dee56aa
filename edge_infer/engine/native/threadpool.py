"""A persistent ggml CPU threadpool per llama_context, as llama-server attaches one.

Without one, ggml's CPU backend makes a throwaway pool for every graph it computes: each
llama_decode starts and joins its worker threads, and the workers start cold. llama-server
(common/common.cpp) creates a pool once, with hybrid polling (workers spin a little before
they sleep), and attaches it to the context. The functions live in the CPU backend library
(one of the variants of a portable build), so they are looked up through its registry.
"""

from __future__ import annotations

import ctypes
import logging

import llama_cpp
import llama_cpp.llama_cpp as bindings

log = logging.getLogger("edge_infer.engine")

GGML_MAX_N_THREADS = 512   # ggml.h
DEFAULT_POLL = 50          # ggml_threadpool_params_init's default, and llama-server's --poll


class ThreadpoolParams(ctypes.Structure):
    """struct ggml_threadpool_params (ggml.h)."""
    _fields_ = [("cpumask", ctypes.c_bool * GGML_MAX_N_THREADS),  # all false: inherited affinity
                ("n_threads", ctypes.c_int),
                ("prio", ctypes.c_int),          # enum ggml_sched_priority, 0 = normal
                ("poll", ctypes.c_uint32),       # 0 no polling ... 100 aggressive
                ("strict_cpu", ctypes.c_bool),
                ("paused", ctypes.c_bool)]


_NEW = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.POINTER(ThreadpoolParams))
_FREE = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_DEV_TYPE_CPU = 0

_lib = bindings._lib
_lib.llama_attach_threadpool.argtypes = [llama_cpp.llama_context_p_ctypes, ctypes.c_void_p, ctypes.c_void_p]
_lib.llama_attach_threadpool.restype = None
_lib.llama_detach_threadpool.argtypes = [llama_cpp.llama_context_p_ctypes]
_lib.llama_detach_threadpool.restype = None


def _cpu_threadpool_functions():
    """(new, free) from the CPU backend's registry, or None when it offers neither."""
    from edge_infer.engine.native import backend

    ggml = backend.ggml_library()
    for i in range(ggml.ggml_backend_dev_count()):
        dev = ggml.ggml_backend_dev_get(i)
        if ggml.ggml_backend_dev_type(dev) != _DEV_TYPE_CPU:
            continue
        reg = ggml.ggml_backend_dev_backend_reg(dev)
        new = ggml.ggml_backend_reg_get_proc_address(reg, b"ggml_threadpool_new")
        free = ggml.ggml_backend_reg_get_proc_address(reg, b"ggml_threadpool_free")
        if new and free:
            return _NEW(new), _FREE(free)
    return None


class CpuThreadpools:
    """The context's CPU threadpools, one per poll level, each created when first used and all
    freed at close; `use(poll)` attaches the one for that poll (engine/cpu_share.py switches
    between the configured poll and 0).

    Why none is freed before close: ggml's CPU backend remembers the pool it computed with last
    and pauses it when the context hands it another (ggml_backend_cpu_set_threadpool, at the
    next llama_decode). Freeing the old pool when the poll changed made that pause lock a freed
    mutex: servers whose load came and went hung in llama_decode until the watchdog ended their
    requests (300 s), or aborted in pthread_mutex_lock. A pool switched away from stays paused,
    its workers asleep; there are at most two.
    """

    def __init__(self, context_handle, n_threads: int, poll: int = DEFAULT_POLL):
        self._context, self.n_threads = context_handle, n_threads
        self._pools: dict[int, int] = {}   # poll -> pool handle
        self.poll: int | None = None       # the attached pool's
        fns = _cpu_threadpool_functions() if n_threads > 0 else None
        if fns is None:
            log.info("no CPU threadpool to attach: ggml makes one per graph")
        self._new, self._free = fns or (None, None)
        self.use(poll)

    def use(self, poll: int) -> None:
        """Compute with the pool whose workers spin `poll` before sleeping, from the next decode."""
        poll = max(0, min(100, poll))
        if self._new is None or self._context is None:
            return   # no pool to attach (none offered, --poll -1), or closed
        handle = self._pools.get(poll)
        if handle is None:
            params = ThreadpoolParams(n_threads=self.n_threads, prio=0, poll=poll, strict_cpu=False, paused=False)
            handle = self._new(ctypes.byref(params))
            if not handle:
                log.warning("ggml could not create a threadpool of %d threads (poll %d)", self.n_threads, poll)
                return
            self._pools[poll] = handle
        # One pool for decode and batch: both run with the same thread count (as llama-server
        # when --threads-batch equals --threads).
        _lib.llama_attach_threadpool(self._context, handle, handle)
        self.poll = poll

    @property
    def handle(self):
        """The attached pool; None: ggml makes one per graph."""
        return self._pools.get(self.poll)

    def detach(self) -> None:
        """The context computes on no pool of ours from now (before the context is freed)."""
        if self.handle and self._context:
            _lib.llama_detach_threadpool(self._context)
        self._context = None

    def close(self) -> None:
        """Free every pool; call once the context is freed or detached (nothing computes on them)."""
        self.detach()
        for handle in self._pools.values():
            self._free(handle)
        self._pools.clear()
