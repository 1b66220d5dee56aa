"""The context's CPU threadpools (engine/native/threadpool.py), with ggml and llama.cpp faked: a pool
is never freed while the context may still hold it. ggml's CPU backend pauses the pool it
computed with last when the context hands it another, at the next decode; freeing the old one
at a poll change made that pause lock freed memory (servers hung in llama_decode, or aborted)."""

from __future__ import annotations

import pytest

from edge_infer.engine.native import threadpool


class FakeGgml:
    def __init__(self):
        self.created, self.freed, self.attached, self.detached = [], [], [], 0
        self.live: set[int] = set()

    def new(self, params_ref):
        handle = 1000 + len(self.created)
        self.created.append(params_ref._obj.poll)
        self.live.add(handle)
        return handle

    def free(self, handle):
        assert handle in self.live, "freed twice"
        self.live.remove(handle)
        self.freed.append(handle)

    # llama.cpp's side
    def llama_attach_threadpool(self, ctx, pool, pool_batch):
        assert pool in self.live and pool == pool_batch
        self.attached.append(pool)

    def llama_detach_threadpool(self, ctx):
        self.detached += 1


@pytest.fixture
def ggml(monkeypatch):
    fake = FakeGgml()
    monkeypatch.setattr(threadpool, "_cpu_threadpool_functions", lambda: (fake.new, fake.free))
    monkeypatch.setattr(threadpool, "_lib", fake)
    return fake


def test_switching_polls_keeps_every_pool_alive_and_reuses_them(ggml):
    pools = threadpool.CpuThreadpools(object(), n_threads=2, poll=50)
    busy_quiet = [0, 50, 0, 50, 0]
    for poll in busy_quiet:
        pools.use(poll)
        assert pools.poll == poll
    assert ggml.created == [50, 0], "one pool per poll, made once"
    assert ggml.freed == [], "a pool the backend may still pause is never freed while serving"
    assert ggml.attached == [1000, 1001, 1000, 1001, 1000, 1001]
    pools.detach()
    pools.close()
    assert sorted(ggml.freed) == [1000, 1001] and ggml.detached == 1
    assert pools.handle is None
    pools.close()  # twice is harmless
    pools.use(50)  # and nothing is attached to a context that is gone
    assert ggml.created == [50, 0]


def test_no_pool_when_asked_for_none(ggml):
    pools = threadpool.CpuThreadpools(object(), n_threads=0, poll=50)   # --poll -1
    pools.use(0)
    assert pools.handle is None and ggml.created == []
    pools.close()
    assert ggml.detached == 0
