"""Where the plan puts each byte, with faked device lists (one GPU, two unequal GPUs, an
integrated GPU sharing RAM, none), checked against llama.cpp's own layer rule."""

import pytest

from edge_infer.config import EngineSettings
from edge_infer.errors import EdgeInferError
from edge_infer.plan import FITS, NO_FIT, Machine, engine_estimate_kwargs, estimate_memory, fit_verdict, plan_memory
from edge_infer.plan.estimate import layer_devices
from edge_infer.plan.machine import GPU, IGPU, Device
from edge_infer.units import GiB, MiB


@pytest.fixture(scope="module")
def smol(smollm2_path):
    from edge_infer.gguf.info import read_model_info

    return read_model_info(smollm2_path)


def gpus(*free_mib, kind=GPU):
    return tuple(Device(f"GPU{i}", 2 * free * MiB, free * MiB, kind) for i, free in enumerate(free_mib))


def test_layer_rule_matches_llama_cpp():
    # llama-model.cpp: the last `slots` of n_layer + 1 go to the devices, cut at the cumulative
    # shares: with shares 3:1 and 31 slots, 24 go to the first (frac < 0.75) and 7 to the second.
    owner = layer_devices(30, 31, (3.0, 1.0))
    assert owner.count(0) == 24 and owner.count(1) == 7 and owner[-1] == 1
    owner = layer_devices(30, 10, (1.0,))
    assert owner[:21] == [None] * 21 and owner[21:] == [0] * 10   # the last 10 slots, output included
    assert layer_devices(30, 0, (1.0,)) == [None] * 31


def test_one_gpu_takes_every_layer_and_says_where_bytes_go(smol):
    plan = plan_memory(smol, Machine(8 * GiB, 8 * GiB, gpus(16 * 1024), True), ctx=4096, parallel=1)
    assert plan.fits and plan.n_gpu_layers == smol.block_count + 1 and plan.devices == ("GPU0",)
    rows = plan.placement()
    assert rows[0][:2] == ("CPU", 0) and rows[1][:2] == ("GPU0", smol.block_count + 1)
    assert rows[1][2] == plan.estimate.gpu_bytes > 0


def test_two_unequal_gpus_split_by_budget(smol):
    full = estimate_memory(smol, 4096, 1, n_gpu_layers=-1).gpu_bytes
    # Neither alone holds the model; together they do. The last device computes the logits
    # (output weights, compute buffer): the split leaves it that room, so it takes few layers.
    big, small = int(full * 0.9 / MiB), int(full * 0.55 / MiB)
    plan = plan_memory(smol, Machine(8 * GiB, 8 * GiB, gpus(big, small), True), ctx=4096, parallel=1)
    assert plan.fits and plan.n_gpu_layers == smol.block_count + 1
    assert plan.devices == ("GPU0", "GPU1")
    n0, n1 = plan.estimate.device_layers
    assert n0 > n1 > 0 and n0 + n1 == smol.block_count + 1
    for used, budget in zip(plan.estimate.device_bytes, plan.device_budgets):
        assert used <= budget
    verdict = fit_verdict(smol, Machine(8 * GiB, 8 * GiB, gpus(big, small), True), 4096, 1)
    assert verdict.gpu != NO_FIT


def test_integrated_gpu_bytes_count_against_ram(smol, monkeypatch):
    from edge_infer.plan import cache_sizes

    # The RAM below is built from needs on an 8 GiB machine; an auto prompt cache (a share of
    # the RAM) would change with it: a fixed one keeps the arithmetic plain.
    monkeypatch.setattr(cache_sizes, "prompt_cache_bytes", lambda mib, ram_available=None: 128 * 2**20)
    igpu = gpus(8 * 1024, kind=IGPU)
    roomy = plan_memory(smol, Machine(8 * GiB, 8 * GiB, igpu, True), ctx=4096, parallel=1)
    assert roomy.fits and roomy.n_gpu_layers == smol.block_count + 1
    # On an integrated GPU a layer's bytes stay in RAM, and offloading adds the GPU's whole
    # compute reservation: with RAM between the CPU-only need and the all-offloaded one,
    # the plan fits by keeping layers on the CPU.
    cpu_only = plan_memory(smol, Machine(8 * GiB, 8 * GiB), ctx=4096, parallel=1).estimate.total_bytes
    ram = int((cpu_only + roomy.estimate.cpu_bytes + roomy.estimate.gpu_bytes) / 2 / 0.9)
    tight = plan_memory(smol, Machine(ram, ram, igpu, True), ctx=4096, parallel=1)
    assert tight.fits and tight.n_gpu_layers < smol.block_count + 1
    assert tight.estimate.cpu_bytes + tight.estimate.gpu_bytes <= tight.ram_budget
    discrete = plan_memory(smol, Machine(ram, ram, gpus(8 * 1024), True), ctx=4096, parallel=1)
    assert discrete.n_gpu_layers == smol.block_count + 1  # a dGPU's memory is its own


def test_no_device_no_layers_and_a_note(smol):
    plan = plan_memory(smol, Machine(8 * GiB, 8 * GiB), ctx=4096, parallel=1, n_gpu_layers=-1)
    assert plan.n_gpu_layers == 0 and plan.devices == () and "no GPU device" in plan.notes[0]
    assert fit_verdict(smol, Machine(8 * GiB, 8 * GiB), 4096, 1).gpu is None


def test_more_layers_than_the_model_are_clamped(smol):
    plan = plan_memory(smol, Machine(8 * GiB, 8 * GiB, gpus(16 * 1024), True), ctx=4096, parallel=1,
                       n_gpu_layers=999)
    assert plan.n_gpu_layers == smol.block_count + 1 and "999" in plan.notes[0]


def test_placement_refuses_what_a_device_cannot_hold(smol):
    from edge_infer.engine.devices.placement import place

    machine = Machine(8 * GiB, 8 * GiB, gpus(16 * 1024), True)
    settings = EngineSettings(ctx=4096, parallel=1, n_gpu_layers=-1, gpu_memory="50MiB")
    with pytest.raises(EdgeInferError) as err:
        place(smol, settings, machine)
    message = str(err.value)
    assert "GPU0" in message and "50.0 MiB free" in message and "\n" not in message
    # Left to the plan, a cap that holds the output layer and its compute buffer (always the
    # first to go: llama.cpp offloads the last layers) and a few more: some layers, not all.
    auto = place(smol, EngineSettings(ctx=4096, parallel=1, gpu_memory="200MiB"), machine)
    assert 0 < auto.n_gpu_layers < smol.block_count + 1
    assert auto.plan.estimate.device_bytes[0] <= 200 * MiB
    assert place(smol, EngineSettings(ctx=4096, parallel=1), Machine(8 * GiB, 8 * GiB)).n_gpu_layers == 0
    with pytest.raises(EdgeInferError, match="gpu-memory"):
        place(smol, EngineSettings(gpu_memory="lots"), machine)
    with pytest.raises(EdgeInferError, match="-1 \\(all\\)"):
        place(smol, EngineSettings(n_gpu_layers=-3), machine)


def test_two_gpus_get_the_plans_split(smol):
    from edge_infer.engine.devices.placement import place

    placed = place(smol, EngineSettings(ctx=4096, parallel=1), Machine(8 * GiB, 8 * GiB, gpus(3000, 1000), True))
    # By budget, less the last device's output layer and compute buffer.
    assert len(placed.tensor_split) == 2 and placed.tensor_split[0] > 3 * placed.tensor_split[1] > 0
    assert placed.n_gpu_layers == smol.block_count + 1
    assert fit_verdict(smol, Machine(8 * GiB, 8 * GiB, gpus(3000, 1000), True), 4096, 1).gpu == FITS


def test_llama_cpp_buffer_report_by_device():
    from edge_infer.engine.native.load_report import device_buffers

    log = ["load_tensors:      Vulkan0 model buffer size =    92.10 MiB\n",
           "load_tensors:   CPU_Mapped model buffer size =    27.00 MiB\n",
           "llama_kv_cache:    Vulkan0 KV buffer size =    90.00 MiB\n",
           "sched_reserve:    Vulkan0 compute buffer size =    98.25 MiB\n",
           "sched_reserve: Vulkan_Host compute buffer size =    10.02 MiB\n"]
    found = device_buffers(log)
    assert found["Vulkan0"] == {"model": int(92.10 * MiB), "KV": 90 * MiB, "compute": int(98.25 * MiB)}
    assert found["CPU"] == {"model": 27 * MiB, "compute": int(10.02 * MiB)}


def test_a_device_that_refuses_big_tensors_keeps_the_output_on_the_cpu(gemma3_path, smol):
    """Vulkan refuses ops on tensors over maxStorageBufferRange (128 MiB on llvmpipe): Gemma 3's
    262k-token output matrix and its 512-row logits stay on the CPU, SmolLM2's go to the device."""
    from edge_infer.gguf.info import read_model_info

    gemma = read_model_info(gemma3_path)
    free = estimate_memory(gemma, 2048, 4, n_gpu_layers=-1)
    capped = estimate_memory(gemma, 2048, 4, n_gpu_layers=-1, max_tensor=128 * MiB)
    logits = 512 * gemma.vocab_size * 4
    assert free.device_compute_bytes >= logits > 10 * capped.device_compute_bytes  # activations only
    assert free.gpu_bytes - capped.gpu_bytes == (gemma.output_weight_bytes + gemma.input_weight_bytes
                                                 + free.device_compute_bytes - capped.device_compute_bytes)
    assert capped.device_layers == (gemma.block_count + 1,)  # the slot is the device's, the matrix is not
    assert capped.cpu_bytes > free.cpu_bytes
    small_vocab = estimate_memory(smol, 2048, 4, n_gpu_layers=-1, max_tensor=128 * MiB)
    assert small_vocab.gpu_bytes == estimate_memory(smol, 2048, 4, n_gpu_layers=-1).gpu_bytes
    machine = Machine(8 * GiB, 8 * GiB, (Device("Vulkan0", 2 * GiB, 2 * GiB, GPU, max_tensor_bytes=128 * MiB),), True)
    plan = plan_memory(gemma, machine, ctx=2048, parallel=4)
    as_engine = estimate_memory(gemma, 2048, 4, n_gpu_layers=-1, max_tensor=128 * MiB, **engine_estimate_kwargs())
    assert plan.n_gpu_layers == gemma.block_count + 1 and plan.estimate.device_bytes == as_engine.device_bytes
