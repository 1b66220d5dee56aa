"""Requests that share a system prompt share its KV cells (real SmolLM2).

A new request takes the prefix from any slot, even one that is still decoding, and
evaluates only the rest. Sharing must change neither its distributions nor the donor's.
"""

from edge_infer.engine import Request, SamplingParams, TokenEvent

from .test_batching import kl

SYSTEM = ("You are a careful assistant for a public library. Answer in plain English, cite the "
          "section of the catalogue you used, and keep every answer under one hundred words.")


def chat(question: str) -> list[dict]:
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}]


def test_a_request_shares_the_system_prompt_of_one_still_decoding(make_engine):
    # No drafts: the donor's logits are compared at a tight bound, and whether a draft is made
    # (a batch of another shape) follows measured step times.
    engine = make_engine(parallel=4, draft_max=0)
    assert engine.scheduler.share_prefixes
    greedy = SamplingParams(temperature=0.0, max_tokens=40, ignore_eos=True)
    donor_stream = engine.submit(Request(messages=chat("How do I renew a book?"), sampling=greedy,
                                         capture_logprobs=True))
    first = next(iter(donor_stream))
    assert isinstance(first, TokenEvent)  # the donor is decoding now

    question = chat("Where are the maps kept?")
    shared = len(engine.tokenize_messages(chat("")))  # roughly the system prompt's tokens
    forced = engine.tokenize(" The maps are kept on the second floor, in section G.")
    sharer = engine.generate(Request(messages=question, forced_tokens=forced, capture_logprobs=True))
    rest = donor_stream.result()
    donor_tokens, donor_logprobs = [first.token] + rest.tokens, [first.logprobs] + rest.logprobs
    assert len(donor_tokens) == 40

    prompt = engine.tokenize_messages(question)
    assert sharer.stats.cached_tokens >= shared - 8, "the system prompt was evaluated again"
    assert sharer.stats.prompt_eval_tokens == len(prompt) - sharer.stats.cached_tokens

    # Both match an engine that shares nothing.
    fresh = make_engine(parallel=1, kv_unified=False)
    assert not fresh.scheduler.share_prefixes
    ref = fresh.generate(Request(messages=question, forced_tokens=forced, capture_logprobs=True))
    assert ref.stats.cached_tokens == 0
    for pos, (a, b) in enumerate(zip(sharer.logprobs, ref.logprobs)):
        assert kl(a, b) < 0.05, f"sharer position {pos}: KL {kl(a, b):.4f}"
    ref_donor = fresh.generate(Request(messages=chat("How do I renew a book?"), forced_tokens=donor_tokens,
                                       capture_logprobs=True))
    for pos, (a, b) in enumerate(zip(donor_logprobs, ref_donor.logprobs)):
        assert kl(a, b) < 0.05, f"donor position {pos}: KL {kl(a, b):.4f}"
    # Control: the comparison would notice a different context.
    assert kl(sharer.logprobs[0], ref_donor.logprobs[0]) > 1.0


def test_eight_requests_evaluate_a_shared_system_prompt_once(make_engine):
    engine = make_engine(parallel=8)
    params = SamplingParams(temperature=0.0, max_tokens=8)
    engine.generate(Request(messages=chat("Hello"), sampling=params))  # one slot holds the prefix
    questions = ["Opening hours?", "Can I print here?", "Do you lend e-books?", "Is there wifi?",
                 "How many books can I borrow?", "Are there study rooms?", "Do you have DVDs?",
                 "Can children join?"]
    streams = [engine.submit(Request(messages=chat(q), sampling=params)) for q in questions]
    done = [s.result() for s in streams]
    shared = len(engine.tokenize_messages(chat("")))
    assert all(c.error is None for c in done)
    assert all(c.stats.cached_tokens >= shared - 8 for c in done)
    evaluated = sum(c.stats.prompt_eval_tokens for c in done)
    total = sum(c.stats.prompt_tokens for c in done)
    assert evaluated < total / 2, f"evaluated {evaluated} of {total} prompt tokens"
    # The stats count a shared cell once.
    held = sum(len(s.cached) for s in engine.scheduler.slots)
    assert engine.snapshot().kv_cells_used <= held - 7 * (shared - 8)
