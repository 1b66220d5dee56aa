import pytest

from edge_infer.config import EngineSettings


@pytest.fixture(scope="module")
def make_engine(smollm2_path):
    """Engines on the real SmolLM2, closed at the end of the module."""
    from edge_infer.engine import Engine

    engines = []

    def make(path=None, **settings):
        base = dict(ctx=1024, parallel=1, n_threads=2)
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
