"""Model-manager logic without a network or llama.cpp: quant names, file grouping, fit
verdicts, the memory planner, header parsing from a prefix, progress output."""

from __future__ import annotations

import io

import pytest

from edge_infer.plan import (FITS, NO_FIT, TIGHT, GpuDevice, Machine, estimate_memory, fit_verdict,
                             parse_nvidia_smi, plan_memory, plan_settings, verdict)
from edge_infer.units import GiB, MiB
from edge_infer.gguf import quant_types as qt
from edge_infer.store.hub import HubFile, RepoListing, parse_spec


@pytest.mark.parametrize("name, quant, stem", [
    ("SmolLM2-135M-Instruct.Q4_1.gguf", "Q4_1", "SmolLM2-135M-Instruct"),
    ("gemma-3-270m-q4_k_m.gguf", "Q4_K_M", "gemma-3-270m"),
    ("Meta-Llama-3-8B-Instruct-IQ2_XXS.gguf", "IQ2_XXS", "Meta-Llama-3-8B-Instruct"),
    ("Qwen3-30B-UD-Q4_K_XL-00001-of-00002.gguf", "UD-Q4_K_XL", "Qwen3-30B"),
    ("model-f16.gguf", "F16", "model"),
    ("phi-2.Q5_K.gguf", "Q5_K", "phi-2"),
    ("plain.gguf", None, "plain"),
])
def test_quant_and_stem_from_file_names(name, quant, stem):
    assert qt.quant_from_filename(name) == quant
    assert qt.model_stem(name) == stem


def test_quant_table():
    assert qt.canonical("q4_k") == "Q4_K_M" and qt.canonical("fp16") == "F16"
    assert qt.lookup("Q4_K_M").ftype == 15 and qt.lookup("Q8_0").ftype == 7
    order = sorted(["Q2_K", "F16", "Q4_K_M", "Q8_0", "Q6_K", "Q3_K_M"], key=qt.precision_key)
    assert order == ["Q2_K", "Q3_K_M", "Q4_K_M", "Q6_K", "Q8_0", "F16"]
    assert not qt.is_quantized("BF16") and qt.is_quantized("Q8_0")
    assert qt.split_info("x-Q8_0-00002-of-00003.gguf") == ("x-Q8_0", 2, 3)


def _file(path, size=100):
    return HubFile(path, size, "ab" * 32)


def test_listing_groups_levels_and_split_files():
    listing = RepoListing("o/r", "main", "c" * 40, (
        _file("README.md"),
        _file("M-Q4_K_M.gguf", 400),
        _file("M-Q8_0-00002-of-00002.gguf", 300),
        _file("M-Q8_0-00001-of-00002.gguf", 500),
        _file("M-Q2_K-00001-of-00003.gguf", 10),          # a shard missing: left out
        _file("M-Q2_K-00003-of-00003.gguf", 10),
        _file("mmproj-M-f16.gguf", 50),                    # a vision projector, not a model
        _file("BF16/M-BF16.gguf", 1600),
    ))
    groups = {g.quant: g for g in listing.gguf_groups()}
    assert set(groups) == {"Q4_K_M", "Q8_0", "BF16"}
    q8 = groups["Q8_0"]
    assert q8.split and q8.size == 800 and [f.path for f in q8.files] == [
        "M-Q8_0-00001-of-00002.gguf", "M-Q8_0-00002-of-00002.gguf"]
    assert listing.find("q4_k")[0].quant == "Q4_K_M"


def test_parse_spec():
    assert parse_spec("o/r") == ("o/r", None, None)
    assert parse_spec("o/r:Q4_K_M") == ("o/r", "Q4_K_M", None)
    assert parse_spec("o/r@v1.0") == ("o/r", None, "v1.0")
    assert parse_spec("o/r@abc:Q8_0") == ("o/r", "Q8_0", "abc")
    assert parse_spec("o/r:Q8_0@abc") == ("o/r", "Q8_0", "abc")


def test_verdict_thresholds():
    assert verdict(80, 100) == FITS and verdict(81, 100) == TIGHT
    assert verdict(100, 100) == TIGHT and verdict(101, 100) == NO_FIT and verdict(1, 0) == NO_FIT


def test_nvidia_smi_parsing():
    gpus = parse_nvidia_smi("NVIDIA H200, 143771, 140000\nNVIDIA T4, 15360, 15000\n\nbad line\n")
    assert [g.name for g in gpus] == ["NVIDIA H200", "NVIDIA T4"]
    assert gpus[1].total_bytes == 15360 * MiB and gpus[1].free_bytes == 15000 * MiB


@pytest.fixture(scope="module")
def smol(smollm2_path):
    from edge_infer.gguf.info import read_model_info

    return read_model_info(smollm2_path)


def test_fit_verdict_ram_and_gpu(smol):
    cpu_only = Machine(4 * GiB, 4 * GiB)
    fit = fit_verdict(smol, cpu_only, 4096, 1)
    assert fit.ram == FITS and fit.gpu is None and fit.best == FITS
    tiny_gpu = Machine(4 * GiB, 4 * GiB, (GpuDevice("g", 256 * MiB, 200 * MiB),), True)
    fit = fit_verdict(smol, tiny_gpu, 4096, 1)
    assert fit.gpu == NO_FIT and fit.ram == FITS and fit.best == FITS
    assert fit.gpu_need > 200 * MiB


def test_plan_puts_layers_on_the_gpu_it_has(smol):
    big = Machine(8 * GiB, 8 * GiB, (GpuDevice("g", 16 * GiB, 16 * GiB),), True)
    plan = plan_memory(smol, big, ctx=4096, parallel=1)
    assert plan.fits and plan.n_gpu_layers == smol.block_count + 1  # every layer and the output
    small = Machine(8 * GiB, 8 * GiB, (GpuDevice("g", 400 * MiB, 300 * MiB),), True)
    plan = plan_memory(smol, small, ctx=4096, parallel=1)
    assert plan.fits and 0 < plan.n_gpu_layers < smol.block_count + 1
    assert plan.estimate.gpu_bytes <= plan.gpu_budget
    more = plan_memory(smol, small, ctx=4096, parallel=1, n_gpu_layers=plan.n_gpu_layers + 1)
    assert more.estimate.gpu_bytes > plan.gpu_budget and not more.fits
    # A GPU the llama.cpp build cannot use counts for nothing.
    cpu_build = Machine(8 * GiB, 8 * GiB, (GpuDevice("g", 16 * GiB, 16 * GiB),), False)
    assert plan_memory(smol, cpu_build, ctx=4096).n_gpu_layers == 0


def test_plan_trades_slots_then_context_for_memory(smol, monkeypatch):
    from edge_infer.plan import cache_sizes
    from edge_infer.plan.fit import engine_estimate_kwargs

    # The RAM below is built from a need on this machine; an auto prompt cache (a share of the
    # RAM) would shrink with it: a fixed one keeps the arithmetic plain.
    monkeypatch.setattr(cache_sizes, "prompt_cache_bytes", lambda mib, ram_available=None: 128 * MiB)

    # As the engine sizes it: a pool of min(slots, 2) contexts and the prompt cache's cap.
    need_1x4096 = estimate_memory(smol, 4096, 1, **engine_estimate_kwargs()).total_bytes
    ram = int(need_1x4096 / 0.9) + MiB
    plan = plan_memory(smol, Machine(ram, ram), ctx=4096, max_parallel=8)
    assert plan.fits and 1 <= plan.parallel < 8 and plan.ctx == 4096
    assert plan.estimate.total_bytes <= plan.ram_budget
    assert f"{plan.parallel} slots instead of 8" in plan.notes[0]
    roomy = plan_memory(smol, Machine(8 * GiB, 8 * GiB), ctx=4096, max_parallel=8)
    assert roomy.parallel == 8 and not roomy.notes
    # Less RAM, context left open: the context shrinks (in steps of 256).
    plan = plan_memory(smol, Machine(ram - 60 * MiB, ram - 60 * MiB))  # KV at 4096: 90 MiB
    assert plan.fits and plan.ctx < 4096 and plan.ctx % 256 == 0 and "context" in plan.notes[0]
    # Context fixed by the caller and too large: reported, not changed.
    plan = plan_memory(smol, Machine(200 * MiB, 200 * MiB), ctx=8192)
    assert not plan.fits and plan.ctx == 8192 and "needs" in plan.notes[-1]


def test_plan_settings_fills_what_was_left_open(smol):
    from edge_infer.config import EngineSettings

    settings, plan = plan_settings(smol, EngineSettings(ctx=4096, parallel=1), Machine(8 * GiB, 8 * GiB),
                                   max_parallel=4)
    assert settings.parallel == plan.parallel == 4 and settings.ctx == 4096 and settings.n_gpu_layers == 0


def test_header_prefix_parsing(tiny_gguf):
    from edge_infer.errors import ModelFileError
    from edge_infer.gguf.header import NeedMoreBytes, parse_header_prefix, read_header

    data = tiny_gguf.read_bytes()
    whole = read_header(tiny_gguf)
    with pytest.raises(NeedMoreBytes):
        parse_header_prefix(data[:100], len(data))
    got = parse_header_prefix(data[:whole.data_offset], len(data))
    assert got.tensors == whole.tensors and got.data_offset == whole.data_offset
    with pytest.raises(ModelFileError, match="not a GGUF"):
        parse_header_prefix(b"PK\x03\x04" + bytes(100), 10_000)


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
