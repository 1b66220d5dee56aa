"""The engine's typed counters: totals, the TTFT window, the token rates (no model)."""

from edge_infer.engine.stats import EngineStats, FinishedRequest, RequestStats


def test_started_counts_prompt_and_evaluated_tokens():
    stats = EngineStats()
    stats.started(100, 60)
    stats.started(10, 0)
    assert (stats.prompt_tokens, stats.prompt_eval_tokens) == (110, 50)


def test_first_token_is_timed_once():
    stats, req = EngineStats(), RequestStats(queued_at=10.0)
    stats.first_token(req, 10.5)
    stats.first_token(req, 11.0)
    assert req.first_token_at == 10.5 and list(stats.ttfts) == [0.5]


def test_ttft_window_keeps_the_last_hundred():
    stats = EngineStats()
    for i in range(150):
        stats.first_token(RequestStats(queued_at=0.0), float(i + 1))
    assert len(stats.ttfts) == 100 and stats.ttfts[0] == 51.0
    assert stats.ttft_percentile(0.5) == 100.5


def test_stepped_feeds_both_rate_meters():
    stats = EngineStats()
    stats.stepped(n_prefill=40, n_decode=0, now=100.0)
    stats.stepped(n_prefill=0, n_decode=4, now=100.5)
    assert stats.prefill_rate.rate(now=101.0) == 40.0
    assert stats.decode_rate.rate(now=101.0) == 4.0


def test_each_engine_has_its_own_counters():
    a, b = EngineStats(), EngineStats()
    a.first_token(RequestStats(), 1.0)
    a.stepped(1, 1, 1.0)
    assert not b.ttfts and b.decode_rate.rate(now=1.0) == 0.0


def test_finished_request_copies_the_request_stats():
    st = RequestStats(prompt_tokens=12, cached_tokens=4, generated_tokens=3,
                      queued_at=1.0, started_at=1.5, first_token_at=2.0, finished_at=3.0)
    rec = FinishedRequest.of("req-1", "api", "stop", st)
    assert (rec.id, rec.source, rec.reason) == ("req-1", "api", "stop")
    assert (rec.prompt_tokens, rec.cached_tokens, rec.generated_tokens) == (12, 4, 3)
    assert rec.ttft_s == 1.0 and rec.decode_tok_s == 2.0
