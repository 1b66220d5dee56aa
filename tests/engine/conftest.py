import os

import pytest

from edge_infer.config import EngineSettings


@pytest.fixture(scope="module")
def make_engine(smollm2_path):
    """Engines on the real SmolLM2, closed at the end of the module."""
    from edge_infer.engine import Engine

    engines = []

    def make(path=None, **settings):
        # EDGE_INFER_TEST_N_GPU_LAYERS=-1 runs these tests with every layer on the GPU
        # (a CUDA build; the device check in packaging/gpu_check.sh).
        base = dict(ctx=1024, parallel=1, n_threads=2,
                    n_gpu_layers=int(os.environ.get("EDGE_INFER_TEST_N_GPU_LAYERS", "0")))
        base.update(settings)
        e = Engine(path or smollm2_path, EngineSettings(**base))
        engines.append(e)
        return e

    yield make
    for e in engines:
        e.close()


@pytest.fixture(scope="module")
def smol(make_engine):
    return make_engine(parallel=4)
