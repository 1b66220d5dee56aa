"""ServedEngine (edge_infer/engine/api.py) is what the host, server and TUI may call on an
engine: every test double stands in for all of it (the real Engine: tests/engine)."""

from __future__ import annotations

from pathlib import Path

import pytest

from edge_infer.config import EngineSettings
from edge_infer.engine import ServedEngine


def doubles():
    from tests.host.test_model_host import FakeEngine as HostEngine
    from tests.tui.test_reply_parts import FakeEngine as ChatEngine
    from tests.tui.test_snapshots import FixedEngine

    return [HostEngine(Path("/models/smollm2/smollm2.gguf"), EngineSettings(), "smollm2"), ChatEngine(),
            FixedEngine()]


@pytest.mark.parametrize("double", doubles(), ids=lambda d: type(d).__module__ + "." + type(d).__name__)
def test_every_double_is_a_served_engine(double):
    assert isinstance(double, ServedEngine)


def test_the_protocol_names_what_the_faces_call():
    members = {n for n in dir(ServedEngine) if not n.startswith("_")} | set(ServedEngine.__annotations__)
    assert {"submit", "snapshot", "tokenize", "tokenize_messages", "embed", "rerank", "close", "state",
            "name", "settings", "info", "template", "placement", "plan", "backend", "model", "n_ctx_seq",
            "recent", "embedding_bytes", "embedding_size", "embedding_tokens", "can_rerank"} <= members
