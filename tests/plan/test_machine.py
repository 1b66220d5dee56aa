"""The machine the plan sees: RAM and llama.cpp's devices (faked here), which of them
llama.cpp places layers on, and how they are described."""

from edge_infer.plan.machine import CPU, GPU, IGPU, REMOTE, Device, Machine, detect_machine, offload_devices
from edge_infer.units import GiB

CPU_DEV = Device("CPU", 16 * GiB, 12 * GiB, CPU, "Intel Xeon")
H200 = Device("CUDA0", 141 * GiB, 140 * GiB, GPU, "NVIDIA H200")
IRIS = Device("Vulkan0", 8 * GiB, 6 * GiB, IGPU, "Intel Iris Xe")
WORKER = Device("RPC[10.0.0.2:50052]", 24 * GiB, 20 * GiB, REMOTE)


def test_devices_come_from_the_list_given():
    assert detect_machine([CPU_DEV]).devices == ()
    machine = detect_machine(lambda: [CPU_DEV, H200])
    assert machine.gpu_offload and machine.devices == (H200,) and machine.gpu_free == 140 * GiB
    assert "NVIDIA H200" in machine.describe() and "no GPU" not in machine.describe()
    assert "no GPU" in detect_machine([]).describe()


def test_llama_cpp_order_discrete_gpus_first_integrated_only_alone():
    assert offload_devices([IRIS, H200]) == (H200,)          # an iGPU beside a dGPU is not used
    assert offload_devices([CPU_DEV, IRIS]) == (IRIS,)       # alone it is
    assert offload_devices([H200, WORKER]) == (WORKER, H200)  # remote workers first
    assert IRIS.shares_ram and not H200.shares_ram


def test_a_cap_limits_each_device():
    machine = Machine(16 * GiB, 12 * GiB, (H200,), True).capped(6 * GiB)
    assert machine.devices[0].free_bytes == 6 * GiB and machine.gpu_free == 6 * GiB
    assert Machine(16 * GiB, 12 * GiB, (H200,), True).capped(None).gpu_free == 140 * GiB
