"""Sizes llama.cpp would abort or fail on are refused before a model loads, with one line
naming the flag; the sizes it accepts pass."""

import pytest

from edge_infer.config import EngineSettings
from edge_infer.errors import EdgeInferError


@pytest.mark.parametrize("values,flag", [
    (dict(parallel=0), "--parallel must be 1 to 256"),
    (dict(parallel=257, n_batch=512), "--parallel must be 1 to 256"),
    (dict(ctx=0), "--ctx and --n-batch"),
    (dict(n_batch=0), "--ctx and --n-batch"),
    (dict(parallel=8, n_batch=4), "--n-batch 4 is smaller than --parallel 8"),
])
def test_sizes_llama_cpp_cannot_take_are_refused(values, flag):
    with pytest.raises(EdgeInferError, match=flag):
        EngineSettings(**values).check_sizes()


@pytest.mark.parametrize("values", [dict(n_batch=1), dict(parallel=256, n_batch=256), dict(ctx=1, n_batch=2048),
                                    dict(parallel=8, n_batch=8), dict()])
def test_sizes_it_takes_pass(values):
    EngineSettings(**values).check_sizes()
