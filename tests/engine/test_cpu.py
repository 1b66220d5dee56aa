"""The CPU decisions with faked feature sets: the machine running the tests may have no
AMX, no AVX-512, or be an AMD EPYC; the decision must be right for all of them."""

import pytest

from edge_infer.engine.native import cpu
from edge_infer.errors import EdgeInferError

ALL = list(cpu.X86_VARIANTS)
HASWELL_LAPTOP = cpu.CpuFeatures("x86_64", frozenset({"sse4_2", "avx", "f16c", "fma", "avx2", "bmi2"}))
EPYC_ZEN4 = cpu.CpuFeatures("x86_64", cpu.X86_VARIANTS["zen4"] | {"avx512_bitalg"})
XEON_SPR = cpu.CpuFeatures("x86_64", cpu.X86_VARIANTS["sapphirerapids"] | {"amx_bf16"})
OLD_SSE = cpu.CpuFeatures("x86_64", frozenset({"sse4_2"}))


@pytest.mark.parametrize("features, expected", [
    (HASWELL_LAPTOP, "haswell"), (EPYC_ZEN4, "zen4"), (XEON_SPR, "sapphirerapids"),
    (OLD_SSE, "sse42"), (cpu.CpuFeatures("x86_64"), "x64"),
])
def test_best_variant_is_the_most_capable_the_cpu_runs(features, expected):
    assert cpu.variant_candidates(features, ALL)[0] == expected


def test_a_build_missing_the_best_variant_falls_back_to_the_next():
    assert cpu.variant_candidates(XEON_SPR, ["x64", "haswell", "skylakex"])[0] == "skylakex"


def test_forced_variant_is_checked_against_build_and_cpu():
    assert cpu.variant_candidates(XEON_SPR, ALL, "haswell")[0] == "haswell"
    with pytest.raises(EdgeInferError, match="lacks avx512"):
        cpu.variant_candidates(HASWELL_LAPTOP, ALL, "skylakex")[0]
    with pytest.raises(EdgeInferError, match="unknown CPU variant 'pentium'.*haswell"):
        cpu.variant_candidates(HASWELL_LAPTOP, ALL, "pentium")[0]


def test_a_build_without_variants_is_built_in_and_refuses_a_forced_one():
    assert cpu.variant_candidates(XEON_SPR, [])[0] == cpu.BUILT_IN
    with pytest.raises(EdgeInferError, match="one built-in CPU backend"):
        cpu.variant_candidates(XEON_SPR, [], "haswell")[0]


def test_arm_variants_are_ranked_by_name_when_unknown():
    arm = cpu.CpuFeatures("aarch64", frozenset({"asimd"}))
    assert cpu.variant_candidates(arm, ["armv8.0_1"])[0] == "armv8.0_1"


@pytest.mark.parametrize("features, offered, setting, use", [
    (XEON_SPR, ["AMX", "CPU_REPACK"], "auto", False),   # the crashing path: off
    (XEON_SPR, ["CPU_REPACK"], "auto", True),           # a non-AMX variant on an AMX CPU
    (EPYC_ZEN4, ["CPU_REPACK"], "auto", True),
    (HASWELL_LAPTOP, ["AMX"], "auto", True),             # AMX offered but no tiles to crash
    (XEON_SPR, ["AMX", "CPU_REPACK"], "on", True),
    (EPYC_ZEN4, ["CPU_REPACK"], "off", False),
])
def test_extra_buffer_types_decision(features, offered, setting, use):
    assert cpu.decide_extra_bufts(features, offered, setting)[0] is use


def test_bad_extra_bufts_setting_is_one_line_error():
    with pytest.raises(EdgeInferError, match="must be one of auto, on, off"):
        cpu.decide_extra_bufts(XEON_SPR, [], "maybe")


def test_settings_come_from_the_environment():
    assert cpu.settings_from_env({}) == ("auto", "auto")
    assert cpu.settings_from_env({cpu.CPU_VARIANT_ENV: "haswell", cpu.EXTRA_BUFTS_ENV: "off"}) == ("haswell", "off")


def test_cpuinfo_is_parsed(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nmodel name\t: Fake CPU\nflags\t\t: fpu sse4_2 avx2 amx_int8\n\n"
                    "processor\t: 1\nmodel name\t: Fake CPU\nflags\t\t: other\n")
    f = cpu.read_cpu_features(info)
    assert f.model == "Fake CPU" and f.has_amx and "avx2" in f.flags and "other" not in f.flags


def test_variant_files_are_found(tmp_path):
    for name in ("libggml-cpu-haswell.so", "libggml-cpu-x64.so", "libggml-base.so", "libllama.so"):
        (tmp_path / name).write_bytes(b"")
    assert sorted(cpu.variants_in(tmp_path)) == ["haswell", "x64"]


def test_candidates_go_from_best_down_for_the_loader_to_try():
    assert cpu.variant_candidates(XEON_SPR, ["x64", "haswell", "sapphirerapids"]) == ["sapphirerapids", "haswell", "x64"]
    assert cpu.variant_candidates(XEON_SPR, ALL, "haswell") == ["haswell"]
