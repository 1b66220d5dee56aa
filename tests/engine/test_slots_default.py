"""Slots: serve and the app default to DEFAULT_SLOTS (they share one KV pool, so a slot costs
almost no memory), EDGE_INFER_PARALLEL overrides that, and a slot count below one or above 256 is refused
before llama.cpp sees it."""

import argparse

import pytest

from edge_infer.commands import serve, tui
from edge_infer.config import DEFAULT_SLOTS, EngineSettings
from edge_infer.engine import Engine
from edge_infer.errors import EdgeInferError


def parse(register, argv, monkeypatch, env=None):
    if env is None:
        monkeypatch.delenv("EDGE_INFER_PARALLEL", raising=False)
    else:
        monkeypatch.setenv("EDGE_INFER_PARALLEL", env)
    p = argparse.ArgumentParser()
    register(p.add_subparsers())
    return p.parse_args(argv)


@pytest.mark.parametrize("register,command", [(serve.register, "serve"), (tui.register, "tui")])
def test_serve_and_the_app_default_to_eight_slots(register, command, monkeypatch):
    from edge_infer.commands.common import engine_settings

    assert DEFAULT_SLOTS == 8
    assert engine_settings(parse(register, [command, "smollm2"], monkeypatch)).parallel == 8
    assert engine_settings(parse(register, [command, "smollm2", "--parallel", "2"], monkeypatch)).parallel == 2
    assert engine_settings(parse(register, [command, "smollm2"], monkeypatch, env="3")).parallel == 3


@pytest.mark.parametrize("slots", [0, -1, 257])
def test_a_slot_count_llama_cpp_cannot_take_is_refused_before_loading(smollm2_path, slots):
    with pytest.raises(EdgeInferError, match="--parallel must be 1 to 256"):
        Engine(smollm2_path, EngineSettings(ctx=256, parallel=slots))


def test_the_app_without_settings_reads_the_same_default(monkeypatch, edge_home):
    """EdgeInferApp() (tests, embedding) builds its settings itself: 8 slots, or EDGE_INFER_PARALLEL's."""
    from edge_infer.tui.app import EdgeInferApp

    monkeypatch.delenv("EDGE_INFER_PARALLEL", raising=False)
    assert EdgeInferApp(load_model=False).default_settings.parallel == DEFAULT_SLOTS
    monkeypatch.setenv("EDGE_INFER_PARALLEL", "3")
    assert EdgeInferApp(load_model=False).default_settings.parallel == 3
