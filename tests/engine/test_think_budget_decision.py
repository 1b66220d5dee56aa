"""The reasoning budget's decision (engine/think_budget.py) with text pieces: pure, no model."""

from edge_infer.engine.think_budget import ThinkBudget


def feed(budget: ThinkBudget, pieces: list[str]) -> list[bool]:
    return [budget.after(p) for p in pieces]


def test_a_block_the_template_opened_is_cut_after_its_budget():
    b = ThinkBudget(3, inside=True)
    assert feed(b, ["Let", " me", " think", " more"]) == [False, False, True, False]
    assert b.done and b.spent == 3


def test_a_block_the_reply_opens_counts_from_its_opening():
    b = ThinkBudget(2)
    assert feed(b, ["\n", "<think>", "a", "b", "c"]) == [False, False, False, True, False]


def test_a_closed_block_or_no_block_is_left_alone():
    b = ThinkBudget(5)
    assert feed(b, ["<think>", "x", "</think>", "y", "z", "w", "v", "u"]) == [False] * 8
    assert b.done and b.spent == 1
    plain = ThinkBudget(0)
    assert feed(plain, ["The answer is", " forty-two", " <think>"]) == [False, False, False] and plain.done


def test_no_limit_and_zero_and_a_cut_from_the_user():
    free = ThinkBudget(-1, inside=True)
    assert feed(free, ["a"] * 100) == [False] * 100
    assert free.after("b", cut=True) and free.done
    assert ThinkBudget(0, inside=True).after("a")  # budget 0: the first reasoning token ends it


def test_each_face_asks_for_a_budget_its_own_way():
    from edge_infer.server import anthropic_wire
    from edge_infer.server.schemas import ChatCompletionRequest

    ask = [{"role": "user", "content": "hi"}]
    assert ChatCompletionRequest(messages=ask).reasoning_budget_tokens is None  # the server's default
    assert ChatCompletionRequest(messages=ask, reasoning_effort="low").reasoning_budget_tokens == 256
    assert ChatCompletionRequest(messages=ask, reasoning_effort="none").reasoning_budget_tokens == 0
    assert ChatCompletionRequest(messages=ask, reasoning_effort="high",
                                 reasoning_budget=50).reasoning_budget_tokens == 50
    body = anthropic_wire.MessagesRequest(max_tokens=8, messages=ask,
                                          thinking={"type": "enabled", "budget_tokens": 1024})
    assert anthropic_wire.chat_fields(body)["reasoning_budget"] == 1024
