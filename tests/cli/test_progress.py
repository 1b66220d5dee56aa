"""Progress output of downloads and quantization (plain lines or a terminal bar) and the rate
meter behind their speed and ETA."""

from __future__ import annotations

import io

from edge_infer.units import MiB


def test_progress_plain_lines_and_terminal_bar():
    from edge_infer.commands.progress import ByteProgress

    t = [0.0]
    out = io.StringIO()
    bar = ByteProgress("f.gguf", 100 * MiB, stream=out, tty=False, clock=lambda: t[0])
    for i in range(1, 101):
        t[0] += 0.1
        bar(i * MiB, 100 * MiB)
    lines = out.getvalue().splitlines()
    assert 9 <= len(lines) <= 12 and lines[-1].startswith("f.gguf: 100%")
    assert "10.0 MiB/s" in lines[-1] and "ETA 0s" in lines[-1]
    assert "ETA 9s" in lines[0] or "ETA 8s" in lines[0]

    # On a terminal: one bar redrawn in place (tqdm), starting at the bytes an earlier run
    # kept, and left on its own line when done.
    out = io.StringIO()
    bar = ByteProgress("f.gguf", 100 * MiB, have=50 * MiB, stream=out, tty=True)
    bar(100 * MiB, 100 * MiB)
    frames = out.getvalue().split("\r")[1:]
    assert frames[0].startswith("f.gguf:  50%") and "50.0M/100M" in frames[0]
    assert frames[-1].startswith("f.gguf: 100%") and "100M/100M" in frames[-1]
    assert frames[-1].endswith("\n") and "\n" not in "".join(frames[:-1])


def test_count_progress_plain_lines_every_quarter_with_the_average_pace():
    from edge_infer.commands.progress import CountProgress

    t = [0.0]
    out = io.StringIO()
    steps = CountProgress("Q4_K_M", stream=out, tty=False, clock=lambda: t[0])
    for i in range(1, 11):
        t[0] += 1.0  # one tensor a second: the ETA is one second per tensor left
        steps(i, 10, f"blk.{i}.weight")
    assert out.getvalue().splitlines() == [
        "Q4_K_M  3/10  30.0%  ETA 7s", "Q4_K_M  5/10  50.0%  ETA 5s",
        "Q4_K_M  8/10  80.0%  ETA 2s", "Q4_K_M  10/10 100.0%  ETA 0s"]

    out = io.StringIO()
    steps = CountProgress("Q8_0", stream=out, tty=True)
    for i in range(1, 5):
        steps(i, 4, "output.weight")
    last = out.getvalue().split("\r")[-1]
    assert last.startswith("Q8_0: 100%") and "4/4" in last and "output.weight" in last and last.endswith("\n")


def test_rate_meter_speed_over_the_last_seconds_and_eta():
    from edge_infer.units import RateMeter, human_duration, human_rate

    meter = RateMeter(window=5.0)
    assert meter.rate() == 0.0 and meter.eta(100) is None and human_duration(meter.eta(100)) == "?"
    meter.add(0.0, 0)
    meter.add(4.0, 40 * MiB)
    assert human_rate(meter.rate()) == "10.0 MiB/s" and human_duration(meter.eta(100 * MiB)) == "6s"
    meter.add(8.0, 44 * MiB)  # slowed to 1 MiB/s: the burst before the window no longer counts
    assert human_rate(meter.rate()) == "1.0 MiB/s" and human_duration(meter.eta(104 * MiB)) == "1m00s"
    meter.clear()
    meter.add(17.0, 0)
    assert meter.rate() == 0.0 and meter.eta(10) is None
