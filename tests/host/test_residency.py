"""Pure residency decisions, keep_alive as Ollama parses it, and the models config."""

from __future__ import annotations

import math

import pytest

from edge_infer.config import EngineSettings
from edge_infer.host import Budget, Footprint, KeepAliveError, parse_keep_alive
from edge_infer.host.model_config import ModelConfigError, load_models_config
from edge_infer.host.residency import Candidate, choose_evictions


def cand(name, ram, last_used, evictable=True, vram=0):
    return Candidate(name, Footprint(ram, vram), last_used, evictable)


def test_nothing_goes_when_the_new_model_fits():
    assert choose_evictions([cand("a", 100, 1)], Footprint(100), Budget(ram=300)) == []


def test_least_recently_used_idle_models_go_first_and_only_as_many_as_needed():
    loaded = [cand("old", 100, 1), cand("busy", 100, 0, evictable=False), cand("new", 100, 5), cand("mid", 100, 3)]
    assert choose_evictions(loaded, Footprint(200), Budget(ram=400)) == ["old", "mid"]


def test_none_when_only_busy_models_could_make_room():
    assert choose_evictions([cand("busy", 300, 1, evictable=False)], Footprint(200), Budget(ram=400)) is None


def test_vram_and_the_model_count_are_budgets_too():
    loaded = [cand("gpu", 10, 1, vram=800), cand("cpu", 10, 0)]
    assert choose_evictions(loaded, Footprint(10, 400), Budget(ram=1000, vram=1000)) == ["gpu"]
    assert choose_evictions(loaded, Footprint(10), Budget(ram=1000, vram=1000, max_models=2)) == ["cpu"]


@pytest.mark.parametrize("value, seconds", [
    ("5m", 300), ("1h30m", 5400), ("90s", 90), ("250ms", 0.25), ("1.5h", 5400), ("300", 300), (0, 0),
    ("0", 0), (30, 30), (2.5, 2.5), (-1, math.inf), ("-1", math.inf), ("-5m", math.inf), ("+10s", 10),
])
def test_keep_alive_parses_as_ollama_does(value, seconds):
    assert parse_keep_alive(value) == seconds


@pytest.mark.parametrize("value", ["", "soon", "5 minutes", "5x", "m5", "1h-2m", True, None, [5], {"m": 5}])
def test_a_keep_alive_that_does_not_parse_says_how_to_write_one(value):
    with pytest.raises(KeepAliveError, match="keep_alive"):
        parse_keep_alive(value)


def test_the_models_config_applies_and_refuses_unknown_keys(tmp_path):
    path = tmp_path / "models.toml"
    path.write_text('[defaults]\nkeep_alive = "30m"\n\n[models."Gemma3"]\nctx = 8192\nthreads = 1\n'
                    'cache_type_k = "q8_0"\nkeep_alive = -1\npin = true\n')
    config = load_models_config(path)
    assert config.defaults.keep_alive == 1800
    entry = config.entry_for("other", "gemma3")                    # names match without case
    assert entry.pin and entry.keep_alive == math.inf
    s = entry.apply(EngineSettings(ctx=1024, parallel=3))
    assert (s.ctx, s.parallel, s.n_threads, s.cache_type_k) == (8192, 3, 1, "q8_0")
    assert load_models_config(tmp_path / "absent.toml").models == {}

    for text, message in [("[models.x]\nctxx = 5\n", "models.x.ctxx"), ("[models.x]\nctx = 'big'\n", "models.x.ctx"),
                          ("[models.x]\nkeep_alive = 'soon'\n", "keep_alive"), ("[models.x\n", "not valid TOML"),
                          ("[models.x]\ncache_type_v = 'q3'\n", "must be one of")]:
        path.write_text(text)
        with pytest.raises(ModelConfigError, match=message):
            load_models_config(path)
    with pytest.raises(ModelConfigError, match="does not exist"):
        load_models_config(tmp_path / "absent.toml", required=True)


@pytest.mark.parametrize("text, size", [("6GiB", 6 << 30), ("512MiB", 512 << 20), ("1.5G", 3 << 29), ("4096", 4 << 30),
                                        ("100 kb", 100 << 10)])
def test_sizes_parse(text, size):
    from edge_infer.units import parse_size

    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["", "lots", "0", "-5GiB", "5 parsecs"])
def test_a_bad_size_names_the_flag(text):
    from edge_infer.units import parse_size

    with pytest.raises(ValueError, match="--models-budget"):
        parse_size(text, "--models-budget")
