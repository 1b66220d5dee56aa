"""The disk tier with the real model: a conversation's KV comes back from disk after its model
was unloaded and loaded again, after the RAM tier let it go, and never after the model file
was replaced. (Restores after a server restart: tests/server/test_disk_restart.py.)"""

from __future__ import annotations

import os
import shutil

import numpy as np
import pytest

from edge_infer.engine import Request, SamplingParams

GREEDY = SamplingParams(temperature=0, max_tokens=6)
HISTORY = [{"role": "user", "content": " ".join(f"Crate {i} holds {i * 3} apples." for i in range(50))}]


@pytest.fixture
def kv_dir(tmp_path, monkeypatch):
    folder = tmp_path / "kv"
    monkeypatch.setenv("EDGE_INFER_KV_CACHE", str(folder))
    return folder


def follow_up(first_reply: str) -> list[dict]:
    return HISTORY + [{"role": "assistant", "content": first_reply}, {"role": "user", "content": "And crate 7?"}]


def kl(p_log, q_log) -> float:
    p = np.exp(p_log)
    return float(np.sum(p * (p_log - q_log)))


def test_a_conversation_comes_back_from_disk_after_its_model_was_unloaded(make_engine, kv_dir):
    first = make_engine(ctx=1024, parallel=2, disk_cache="1GiB")
    a = first.generate(Request(messages=HISTORY, sampling=GREEDY))
    first.close()  # unload: its conversations go to disk
    assert len(list(kv_dir.glob("*.kv"))) == 1

    again = make_engine(ctx=1024, parallel=2, disk_cache="1GiB")
    b = again.generate(Request(messages=follow_up(a.text), sampling=GREEDY, capture_logprobs=True))
    history = len(again.tokenize_messages(HISTORY))
    assert b.stats.cached_tokens >= history, (b.stats.cached_tokens, history)
    snap = again.snapshot()
    assert snap.disk_cache_hits_total == 1 and snap.disk_cache_restored_tokens_total >= history
    # The restored cells compute what evaluating the history again computes.
    fresh = make_engine(ctx=1024, parallel=2, prompt_cache_mib=0)
    ref = fresh.generate(Request(messages=follow_up(a.text), forced_tokens=b.tokens, capture_logprobs=True))
    assert ref.stats.cached_tokens == 0
    assert max(kl(x, y) for x, y in zip(b.logprobs, ref.logprobs)) < 0.05


def test_what_the_ram_tier_cannot_hold_goes_to_disk_and_comes_back(make_engine, kv_dir):
    # 1 MiB of RAM tier: smaller than one saved state, so a conversation that loses its only
    # slot goes straight to disk.
    e = make_engine(ctx=1024, parallel=1, prompt_cache_mib=1, disk_cache="1GiB")
    a = e.generate(Request(messages=HISTORY, sampling=GREEDY))
    e.generate(Request(messages=[{"role": "user", "content": "Name a colour."}], sampling=GREEDY))
    e.kv.tiers.disk.flush()
    assert e.snapshot().disk_cache_writes_total == 1
    b = e.generate(Request(messages=follow_up(a.text), sampling=GREEDY))
    assert b.stats.cached_tokens >= len(e.tokenize_messages(HISTORY))
    assert e.snapshot().disk_cache_hits_total == 1


def test_the_same_turn_sent_again_after_a_restart_comes_back_from_disk(make_engine, kv_dir):
    """A retry, a regenerate, a client replaying: the saved state goes on past the prompt (it
    holds the reply too). The disk tier restores it and drops the tail, as the RAM tier does;
    before, it matched only whole prefixes of the prompt and computed the turn from scratch."""
    first = make_engine(ctx=1024, parallel=2, disk_cache="1GiB")
    a = first.generate(Request(messages=HISTORY, sampling=GREEDY))
    first.close()

    again = make_engine(ctx=1024, parallel=2, disk_cache="1GiB")
    b = again.generate(Request(messages=HISTORY, sampling=GREEDY))  # the same turn again
    prompt = len(again.tokenize_messages(HISTORY))
    assert b.stats.cached_tokens >= prompt - 1, (b.stats.cached_tokens, prompt)
    assert again.snapshot().disk_cache_hits_total == 1 and b.text == a.text


def test_a_history_rendered_differently_reuses_the_longest_common_prefix(make_engine, kv_dir):
    """An earlier reply that the template renders differently now (thinking dropped, as
    Qwen3's and DeepSeek's do): the part before it still comes back from disk."""
    first = make_engine(ctx=1024, parallel=2, disk_cache="1GiB")
    thought = "<think>" + "Counting the crates one by one. " * 20 + "</think>Crate 7 holds 21 apples."
    turn = follow_up(thought) + [{"role": "assistant", "content": "Crate 8 holds 24."}]
    first.generate(Request(messages=turn + [{"role": "user", "content": "Thanks."}], sampling=GREEDY))
    first.close()

    again = make_engine(ctx=1024, parallel=2, disk_cache="1GiB")
    dropped = follow_up("Crate 7 holds 21 apples.") + [{"role": "assistant", "content": "Crate 8 holds 24."},
                                                        {"role": "user", "content": "And crate 9?"}]
    b = again.generate(Request(messages=dropped, sampling=GREEDY))
    assert b.stats.cached_tokens >= len(again.tokenize_messages(HISTORY)), b.stats.cached_tokens
    assert again.snapshot().disk_cache_hits_total == 1


def test_states_of_a_replaced_model_file_are_deleted_not_loaded(make_engine, smollm2_path, kv_dir, tmp_path):
    model = tmp_path / "model.gguf"
    shutil.copyfile(smollm2_path, model)
    first = make_engine(path=model, ctx=1024, parallel=1, disk_cache="1GiB")
    a = first.generate(Request(messages=HISTORY, sampling=GREEDY))
    first.close()
    assert len(list(kv_dir.glob("*.kv"))) == 1
    shutil.copyfile(smollm2_path, model)  # "a new version" of the file: written again
    os.utime(model, ns=(1, 1))            # (and certainly another modification time)
    again = make_engine(path=model, ctx=1024, parallel=1, disk_cache="1GiB")
    b = again.generate(Request(messages=follow_up(a.text), sampling=GREEDY))
    assert b.stats.cached_tokens == 0
    assert again.snapshot().disk_cache_rejected_total == 1
