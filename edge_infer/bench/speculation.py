"""N-gram speculation on and off, side by side in one engine: the same prompts alternate
between requests that draft (the engine's default) and requests that ask for no drafts,
greedy, so the outputs can be compared too. One engine, not two: of two identical engines in
one process the one measured second read up to 1.16x the first at one client (off vs off).

Workloads: "quote" (repeat a given passage), "edit" (return a given program with one change)
— the repetitive work prompt lookup is for — and "plain" (open questions, nothing to copy),
which must not get slower, alone or with 8 clients batched.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from edge_infer.bench.workload import QUESTIONS
from edge_infer.engine import Engine, Request, SamplingParams

PASSAGES = [
    "The old lighthouse keeper climbed the spiral stairs every evening at dusk. He lit the great lamp, "
    "wound the clockwork that turned the lens, and wrote the weather in his logbook. Ships passing the "
    "rocky point saw the beam sweep across the water and knew they were safe. In winter the storms came "
    "from the north, and the keeper stayed awake all night, listening to the waves break on the rocks.",
    "Bread needs only four things: flour, water, salt and yeast. Mix them into a soft dough, knead it "
    "until it is smooth, and leave it somewhere warm until it has doubled in size. Shape the loaf, let "
    "it rise again, and bake it in a hot oven until the crust is brown and the bottom sounds hollow.",
    "A river begins as rain on the hills. The water gathers in small streams, the streams join into "
    "brooks, and the brooks flow together into a river that grows wider as it travels to the sea. "
    "Along the way it carries sand and stones, cuts valleys into the land, and gives life to forests.",
]
PROGRAM = '''def total_price(items, tax_rate):
    """Sum the prices of the items and add the tax."""
    subtotal = 0
    for item in items:
        subtotal += item["price"] * item["quantity"]
    tax = subtotal * tax_rate
    return subtotal + tax


def cheapest(items):
    """The item with the lowest price."""
    best = None
    for item in items:
        if best is None or item["price"] < best["price"]:
            best = item
    return best
'''
EDITS = ["Rename the variable subtotal to net", "Rename the function cheapest to lowest_priced",
         "Rename the parameter items to products"]


def workload(name: str) -> list[list[dict]]:
    def user(text):
        return [{"role": "user", "content": text}]
    if name == "quote":
        return [user(f"Repeat this text exactly:\n\n{p}") for p in PASSAGES]
    if name == "edit":
        return [user(f"{e} in this Python code and return the whole code:\n\n{PROGRAM}") for e in EDITS]
    if name == "plain":
        return [user(q) for q in QUESTIONS[:8]]
    raise ValueError(name)


@dataclass
class Side:
    tokens: int = 0
    seconds: float = 0.0
    texts: list[str] = field(default_factory=list)

    @property
    def tok_s(self) -> float:
        return self.tokens / self.seconds if self.seconds else 0.0


@dataclass
class Row:
    workload: str
    clients: int
    off: Side
    on: Side
    drafted: int
    accepted: int

    @property
    def same(self) -> str:
        same = sum(a == b for a, b in zip(self.off.texts, self.on.texts))
        return f"{same}/{len(self.off.texts)}"


def _alone(engine: Engine, messages, max_tokens: int, draft_max: int | None, side: Side) -> None:
    """One request by itself: its decode rate (first token to last), as a user sees it stream."""
    c = engine.generate(Request(messages=messages, sampling=SamplingParams(temperature=0.0, max_tokens=max_tokens),
                                source="bench", draft_max=draft_max))
    side.tokens += max(len(c.tokens) - 1, 0)
    side.seconds += c.stats.finished_at - c.stats.first_token_at
    side.texts.append(c.text)


def _batched(engine: Engine, prompts, clients: int, max_tokens: int, draft_max: int | None, side: Side) -> None:
    """`clients` requests at once: aggregate tokens per second of wall time."""
    results = [None] * clients
    greedy = SamplingParams(temperature=0.0, max_tokens=max_tokens)

    def client(i):
        results[i] = engine.generate(Request(messages=prompts[i % len(prompts)], sampling=greedy, source="bench",
                                             draft_max=draft_max))

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    side.seconds += time.perf_counter() - t0
    side.tokens += sum(len(r.tokens) for r in results)
    side.texts += [r.text for r in results]


def measure(engine: Engine, name: str, clients: int, max_tokens: int, repeat: int) -> Row:
    """Requests with the engine's drafts (draft_max None) against requests with none (0)."""
    prompts = workload(name)

    def one_pass(draft_max: int | None, side: Side) -> None:
        if clients == 1:
            for p in prompts:
                _alone(engine, p, max_tokens, draft_max, side)
        else:
            _batched(engine, prompts, clients, max_tokens, draft_max, side)

    one_pass(0, Side())  # untimed: afterwards both sides find the prompts cached alike
    before = engine.snapshot()
    off, on = Side(), Side()
    for r in range(repeat):
        # Alternate which side goes first, so a drifting machine favours neither.
        for draft_max, side in ([(0, off), (None, on)] if r % 2 == 0 else [(None, on), (0, off)]):
            one_pass(draft_max, side)
    if repeat > 1:  # compare each prompt's text once (greedy: every repeat gives the same)
        n = len(off.texts) // repeat
        off.texts, on.texts = off.texts[:n], on.texts[:n]
    after = engine.snapshot()
    return Row(name, clients, off, on, after.draft_tokens_total - before.draft_tokens_total,
               after.draft_accepted_total - before.draft_accepted_total)


def table(rows: list[Row], draft_max: int) -> str:
    head = ["workload", "clients", "off tok/s", f"on tok/s (draft ≤{draft_max})", "on/off", "drafted",
            "accepted", "same greedy text"]
    lines = [head]
    for r in rows:
        ratio = f"{r.on.tok_s / r.off.tok_s:.2f}" if r.off.tok_s else "-"
        lines.append([r.workload, str(r.clients), f"{r.off.tok_s:.1f}", f"{r.on.tok_s:.1f}", ratio,
                      str(r.drafted), f"{r.accepted} ({r.accepted / r.drafted:.0%})" if r.drafted else "0",
                      r.same])
    widths = [max(len(x[i]) for x in lines) for i in range(len(head))]
    out = ["  ".join(c.ljust(w) for c, w in zip(x, widths)) for x in lines]
    out.append("1 client: decode tok/s of each request alone (first token to last); more clients: "
               "aggregate tok/s of wall time. same greedy text: outputs equal with and without")
    return "\n".join(out)
