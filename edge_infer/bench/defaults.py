"""`edge-infer bench-defaults`: edge-infer and llama.cpp's llama-server each with its own
defaults (only the model and the port given), side by side, alternating, medians of several
runs: plain chat at 1 and 8 clients (SmolLM2), a code edit (qwen-coder returns a 60-line
function with one change: what coding agents ask all day), a new function (nothing in the
prompt to copy: where n-gram drafts cannot help), and all again beside busy-loop processes (a
laptop busy with other work). Each edge-infer pass also records the CPU setting its governor
kept (engine/cpu_share.py): beside its own client, beside the busy loops.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import statistics
import time
from dataclasses import dataclass

from edge_infer.bench import llama_server as llama_server_bench
from edge_infer.bench.http import ServerProcess, Target, free_port, run_http_pass, stream_chat, warm_up
from edge_infer.bench.memory import edge_infer_defaults

EDIT_FUNCTION = "\n".join([
    "def summarize_orders(orders, tax_rate, discount_codes):",
    '    """Totals, counts and the largest order of a list of order dicts."""',
    "    total = 0.0",
    "    count = 0",
    "    largest = None",
    "    by_customer = {}",
    "    skipped = []",
    "    for order in orders:",
    "        if not order.get('items'):",
    "            skipped.append(order.get('id'))",
    "            continue",
    "        subtotal = 0.0",
    "        for item in order['items']:",
    "            price = item['price']",
    "            quantity = item.get('quantity', 1)",
    "            if quantity <= 0:",
    "                continue",
    "            subtotal += price * quantity",
    "        code = order.get('discount')",
    "        if code in discount_codes:",
    "            subtotal *= 1 - discount_codes[code]",
    "        tax = subtotal * tax_rate",
    "        amount = subtotal + tax",
    "        total += amount",
    "        count += 1",
    "        customer = order.get('customer', 'unknown')",
    "        by_customer.setdefault(customer, 0.0)",
    "        by_customer[customer] += amount",
    "        if largest is None or amount > largest[1]:",
    "            largest = (order.get('id'), amount)",
    "    average = total / count if count else 0.0",
    "    top_customer = None",
    "    top_amount = 0.0",
    "    for customer, amount in by_customer.items():",
    "        if amount > top_amount:",
    "            top_customer = customer",
    "            top_amount = amount",
    "    report = {",
    "        'total': round(total, 2),",
    "        'count': count,",
    "        'average': round(average, 2),",
    "        'largest': largest,",
    "        'top_customer': top_customer,",
    "        'skipped': skipped,",
    "    }",
    "    if count == 0:",
    "        report['note'] = 'no orders with items'",
    "    elif len(skipped) > count:",
    "        report['note'] = 'most orders had no items'",
    "    else:",
    "        report['note'] = ''",
    "    lines = []",
    "    for key in ('total', 'count', 'average'):",
    "        lines.append(f'{key}: {report[key]}')",
    "    if largest is not None:",
    "        lines.append(f'largest: {largest[0]} ({largest[1]:.2f})')",
    "    if top_customer is not None:",
    "        lines.append(f'top customer: {top_customer}')",
    "    report['text'] = '\\n'.join(lines)",
    "    return report",
])
EDIT_ASK = ("Here is a Python function:\n\n```python\n" + EDIT_FUNCTION + "\n```\n\nReturn the whole function "
            "with one change: rename the variable `skipped` to `empty_orders`. Reply with the code only.")


NEW_ASK = ("Write a Python function `parse_duration(text)` that turns strings such as '1h30m', '45s', "
           "'2d 4h' and '90 minutes' into a number of seconds, raising ValueError with a helpful message "
           "for anything else. Include a docstring and handle upper case and spaces. Reply with the code only.")
WORKLOADS = ("chat c=1", "chat c=8", "code edit", "new function")


@dataclass
class Measure:
    tok_s: float
    ttft_s: float
    cores: float = 0.0   # CPU the server process used over the pass, in cores (CPU seconds / wall seconds)
    cpu_setting: str = ""  # edge-infer: the poll and threads its governor had at the end of the pass


class CpuMeter:
    """CPU seconds a process spent between start and stop, over the wall time: what a busy
    machine left it, to compare with what it made of it."""

    def __init__(self, pid: int):
        import psutil

        self.proc = psutil.Process(pid)

    def _now(self) -> tuple[float, float]:
        t = self.proc.cpu_times()
        return time.monotonic(), t.user + t.system

    def __enter__(self) -> "CpuMeter":
        self.start = self._now()
        return self

    def __exit__(self, *exc) -> None:
        (w0, c0), (w1, c1) = self.start, self._now()
        self.cores = (c1 - c0) / (w1 - w0) if w1 > w0 else 0.0


SETTLE_S = 1.0  # the busy loops run this long before a pass: a laptop is busy before a request comes
BUSY_BUDGET_S = 120.0  # a pass beside busy loops ends here, counting the tokens that came


def spin(started=None) -> None:
    parent = os.getppid()
    if started is not None:
        started.set()
    while os.getppid() == parent:  # a killed benchmark (or busy program) leaves no loop behind
        for _ in range(1_000_000):
            pass


def busy_program(started: list, apart: bool) -> None:
    """One program that keeps len(started) cores busy: this process and a child per further loop.
    apart: in a session of its own, as a program started from another terminal or the desktop;
    Linux (sched_autogroup) shares the CPU between sessions before it shares it between threads."""
    if apart:
        os.setsid()
    for e in started[1:]:
        if os.fork() == 0:   # a fresh spawned process: no threads to fork with it
            spin(e)
            os._exit(0)
    spin(started[0])


@dataclass(frozen=True)
class Busy:
    """What keeps the machine busy during a pass: `loops` busy loops (0: none), as one program in a
    session of its own (apart) or in the benchmark's own session, beside the servers."""
    loops: int
    apart: bool = True

    @property
    def label(self) -> str:
        return "0" if not self.loops else f"{self.loops} {'apart' if self.apart else 'shared'}"


IDLE = Busy(0)


def autogroup() -> bool | None:
    """Whether the kernel shares the CPU between sessions first (None: not Linux or not said)."""
    try:
        with open("/proc/sys/kernel/sched_autogroup_enabled") as f:
            return f.read().strip() == "1"
    except OSError:
        return None


@contextlib.contextmanager
def busy_loops(busy: Busy):
    """The busy program running (nothing for 0 loops), spinning for SETTLE_S before this yields: a
    spawned child takes a second or more to import its way to the loop, and a pass begun meanwhile
    would start on an idle machine. Yields the program's pid (None for 0 loops): its loops are it
    and its children."""
    if not busy.loops:
        yield None
        return
    ctx = multiprocessing.get_context("spawn")
    started = [ctx.Event() for _ in range(busy.loops)]
    leader = ctx.Process(target=busy_program, args=(started, busy.apart), daemon=True)
    leader.start()
    try:
        if not all(e.wait(60) for e in started):
            raise RuntimeError("the busy loops did not start")
        time.sleep(SETTLE_S)
        yield leader.pid
    finally:
        leader.terminate()   # its other loops see their parent gone and end
        leader.join()


def llama_server(binary: str, model_path) -> ServerProcess:
    port = free_port()
    argv = [binary, "-m", str(model_path), "--host", "127.0.0.1", "--port", str(port)]
    if not llama_server_bench.edge_infer_uses_extra_bufts():
        argv.append("--no-repack")  # as edge-infer on this CPU (AMX: SIGILL/segfault otherwise)
    env = dict(os.environ, LD_LIBRARY_PATH=os.path.dirname(binary))
    return ServerProcess("llama-server", argv, port, env=env)


def chat(target: Target, clients: int, busy: bool = False) -> Measure:
    # Beside busy loops a server can fall to a few tok/s (llama-server did: 0.3 tok/s at c=1):
    # fewer requests there and at most BUSY_BUDGET_S, so that a run ends; tok/s stays comparable.
    # One client: 16 requests idle (one pass of 6 swung 63-82 tok/s on the 2-core machine).
    r = run_http_pass("chat", target, clients, 2 * clients if clients > 1 else (3 if busy else 16), 64,
                      budget_s=BUSY_BUDGET_S if busy else None)
    return Measure(r.agg_tok_s, r.ttft_p50_s)


def code_reply(target: Target, ask: str, max_tokens: int, busy: bool = False) -> Measure:
    import asyncio

    async def go():
        async with target.client(1) as c:
            # the first 160 tokens of the reply beside busy loops (the whole one can take most of an hour)
            return await stream_chat(c, target.resolve_model(), ask, 160 if busy else max_tokens,
                                     deadline=time.perf_counter() + BUSY_BUDGET_S if busy else None)
    r = asyncio.run(go())
    if r.error:
        raise RuntimeError(f"code reply failed: {r.error}")
    return Measure(r.decode_tok_s, r.ttft_s)


def cpu_setting(target: Target) -> str:
    """The poll and threads an edge-infer server decodes with now, and its governor's last trial."""
    import httpx

    snap = httpx.get(target.base_url + "/stats", timeout=10).json()
    kept = f"poll {snap['poll']}, {snap['threads']} threads"
    return kept + (f" [trial: {snap['cpu_verdict']}]" if snap.get("cpu_verdict") else "")


def run(smol, coder, binary: str, repeats: int, loads: tuple[Busy, ...], log=print) -> dict:
    """{(busy, workload, system): [Measure, ...]}, systems alternating within each repeat."""
    out: dict = {}
    makers = {"edge-infer": edge_infer_defaults, "llama-server": lambda p: llama_server(binary, p)}
    for load in loads:
        busy = load.loops > 0
        for rep in range(repeats):
            order = list(makers) if rep % 2 == 0 else list(reversed(makers))
            for system in order:
                for model, work in ((smol, ("chat c=1", "chat c=8")), (coder, ("code edit", "new function"))):
                    with makers[system](model) as srv:
                        warm_up(srv.target)
                        with busy_loops(load):
                            for w in work:
                                with CpuMeter(srv.proc.pid) as cpu:
                                    m = (code_reply(srv.target, EDIT_ASK, 900, busy) if w == "code edit"
                                         else code_reply(srv.target, NEW_ASK, 320, busy) if w == "new function"
                                         else chat(srv.target, int(w[-1]), busy))
                                m.cores = cpu.cores
                                if system == "edge-infer":
                                    m.cpu_setting = cpu_setting(srv.target)
                                out.setdefault((load, w, system), []).append(m)
                                log(f"done: {system} {w} busy={load.label} run {rep + 1}: {m.tok_s:.1f} tok/s "
                                    f"on {m.cores:.2f} cores" + (f"; {m.cpu_setting}" if m.cpu_setting else ""))
    return out


def table(results: dict, loads: tuple[Busy, ...]) -> str:
    med = lambda ms, k: statistics.median(getattr(m, k) for m in ms)  # noqa: E731
    rows = [["workload", "busy loops", "edge-infer tok/s", "llama-server tok/s", "x tok/s", "edge TTFT p50 ms",
             "llama TTFT p50 ms", "edge cores", "llama cores", "edge runs", "llama runs"]]
    for load in loads:
        for w in WORKLOADS:
            e, ls = results.get((load, w, "edge-infer")), results.get((load, w, "llama-server"))
            if not e or not ls:
                continue
            rows.append([w, load.label, f"{med(e, 'tok_s'):.1f}", f"{med(ls, 'tok_s'):.1f}",
                         f"{med(e, 'tok_s') / med(ls, 'tok_s'):.2f}", f"{med(e, 'ttft_s') * 1000:.0f}",
                         f"{med(ls, 'ttft_s') * 1000:.0f}", f"{med(e, 'cores'):.2f}", f"{med(ls, 'cores'):.2f}",
                         " / ".join(f"{m.tok_s:.1f}" for m in e),
                         " / ".join(f"{m.tok_s:.1f}" for m in ls)])
    if len(loads) > 1 and loads[0] == IDLE:
        # tok/s and the CPU the server got, each busy over idle: a server that slows in proportion
        # to the CPU it lost has equal ratios; one whose threads fight the load falls further
        rows.append(["busy / idle (own)", "", "", "", "", "", "", "", "", "", ""])
        for w in WORKLOADS:
            for load in loads[1:]:
                if not any(results.get((load, w, system)) for system in ("edge-infer", "llama-server")):
                    continue
                cells = {}
                for system in ("edge-infer", "llama-server"):
                    idle, busy = results.get((IDLE, w, system)), results.get((load, w, system))
                    for k in ("tok_s", "cores"):
                        cells[system, k] = (f"{med(busy, k) / med(idle, k):.2f}" if idle and busy and med(idle, k)
                                            else "-")
                rows.append([w, load.label, cells["edge-infer", "tok_s"], cells["llama-server", "tok_s"], "", "", "",
                             cells["edge-infer", "cores"], cells["llama-server", "cores"], "", ""])
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(wd) for c, wd in zip(r, widths)).rstrip() for r in rows)


def cpu_settings(results: dict, loads: tuple[Busy, ...]) -> str:
    """Per workload and load, what edge-infer decoded with at the end of each pass."""
    lines = []
    for load in loads:
        for w in WORKLOADS:
            for i, m in enumerate(results.get((load, w, "edge-infer"), ()), 1):
                lines.append(f"{w:<13} busy {load.label:<9} run {i}: {m.cpu_setting}")
    return "\n".join(lines)


def machine() -> str:
    """The CPU the table was measured on: a default tuned on one CPU must be read on another."""
    from edge_infer.engine.native.cpu import read_cpu_features

    features = read_cpu_features()
    repack = "on" if llama_server_bench.edge_infer_uses_extra_bufts() else "off"
    return (f"CPU: {features.model or features.arch}, {os.cpu_count()} logical cores; "
            f"llama.cpp's repacked weights (CPU_REPACK / AMX extra buffers): {repack}")
