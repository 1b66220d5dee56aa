"""PromptCache: LRU by bytes, longest-prefix take (fake data, no llama.cpp)."""

from edge_infer.engine.kv.ram_tier import PromptCache


def test_take_returns_and_removes_the_longest_prefix():
    c = PromptCache(100)
    c.put((1, 2), b"a" * 10)
    c.put((1, 2, 3), b"b" * 10)
    c.put((9,), b"c" * 10)
    e = c.take([1, 2, 3, 4])
    assert e.tokens == (1, 2, 3) and e.data == b"b" * 10
    assert c.take([1, 2, 3, 4]).tokens == (1, 2)
    assert c.take([1, 2, 3, 4]) is None
    k = c.counters()
    assert (k.entries, k.bytes, k.hits, k.misses) == (1, 10, 2, 1)


def test_lru_eviction_by_bytes_and_oversized_entries():
    c = PromptCache(25)
    assert c.put((1,), b"x" * 10) and c.put((2,), b"x" * 10)
    assert c.take([1]) is not None
    c.put((1,), b"x" * 10)          # now (2,) is the oldest
    c.put((3,), b"x" * 10)          # evicts (2,)
    assert c.counters().evictions == 1 and c.peek([2]) == 0 and c.peek([1, 5]) == 1
    assert not c.put((4,), b"x" * 26)
    assert c.bytes == 20 and len(c) == 2


def test_put_same_tokens_replaces():
    c = PromptCache(100)
    c.put((1,), b"x" * 10)
    c.put((1,), b"y" * 20)
    assert len(c) == 1 and c.bytes == 20 and c.take([1]).data == b"y" * 20


def test_an_entry_past_the_prompt_gives_what_they_share_when_its_tail_is_short():
    """The same question asked again: the entry (question and reply) goes past the prompt."""
    from edge_infer.engine.kv.ram_tier import PARTIAL_TAIL
    from edge_infer.engine.kv.slots import common_prefix

    c = PromptCache(10_000)
    question = tuple(range(40))
    c.put(question + (100,) * 60, b"q" * 10)                     # the question and its reply
    c.put(question[:20] + (7,) * (PARTIAL_TAIL + 30), b"l" * 10)  # shares 20, a long tail past it
    assert c.peek(question) == 40 and c.peek(question[:30] + (5, 5)) == 30
    assert c.take(question).data == b"q" * 10
    assert c.peek(question) == 0     # what is left shares 20 tokens but goes on too far to restore
    assert c.peek(question[:20] + (7,) * (PARTIAL_TAIL + 30) + (1,)) == 20 + PARTIAL_TAIL + 30  # a prefix: whole
    assert [common_prefix(a, b) for a, b in (((1, 2, 3), (1, 2, 4)), ((), (1,)), ((1, 2), (1, 2, 3)),
                                             (tuple(range(1000)), tuple(range(999)) + (0,)))] == [2, 0, 2, 999]


def test_both_tiers_use_a_saved_state_by_one_rule():
    from edge_infer.engine.kv.ram_tier import PARTIAL_TAIL, usable_prefix

    saved = tuple(range(2000))
    assert usable_prefix(saved[:100], saved) == 100                      # a follow-up turn: all of it
    assert usable_prefix(saved[:600], saved[:100]) == 100                # its tail (500) is short
    assert usable_prefix(saved[:1500], saved[:1000] + (-1,)) == 1000     # tail 500 <= shared 1000
    assert usable_prefix(saved[:1800], saved[:600] + (-1,)) == 0         # tail 1200 > shared 600
    assert usable_prefix(saved[: PARTIAL_TAIL + 10], (-1,)) == 0         # nothing shared
