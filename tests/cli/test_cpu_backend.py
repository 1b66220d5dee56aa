"""The llama.cpp CPU backend as users meet it: a long prompt on whatever CPU runs the tests
(on an AMX Xeon this crashed before the extra-buffer decision), the variant and buffer
types shown, bad settings as one-line errors, and an older CPU under qemu."""

import json
import os
import shutil
import subprocess
import sys

import pytest

from edge_infer.engine.native import cpu

LONG_PROMPT = "word " * 300


def edge_infer(*args, env=None, prefix=(), timeout=300):
    return subprocess.run([*prefix, sys.executable, "-m", "edge_infer", *map(str, args)],
                          capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})})


def test_a_300_token_prompt_runs_through_the_engine(smollm2_path):
    from edge_infer.config import EngineSettings
    from edge_infer.engine import Engine, Request, SamplingParams

    engine = Engine(smollm2_path, EngineSettings(ctx=1024, parallel=2))
    try:
        tokens = engine.tokenize(LONG_PROMPT)
        assert len(tokens) >= 300
        done = engine.generate(Request(prompt_tokens=tokens, sampling=SamplingParams(
            temperature=0, max_tokens=8, ignore_eos=True)))
        assert done.error is None and len(done.tokens) == 8
    finally:
        engine.close()


def test_the_cli_answers_a_long_prompt(smollm2_path):
    r = edge_infer("run", smollm2_path, LONG_PROMPT, "--max-tokens", "8")
    assert r.returncode == 0, r.stderr[-2000:]


def test_inspect_shows_the_backend(smollm2_path):
    r = edge_infer("inspect", smollm2_path, "--json")
    assert r.returncode == 0, r.stderr
    backend = json.loads(r.stdout)["backend"]
    features = cpu.read_cpu_features()
    if backend["variants_available"]:   # the portable build: the best variant for this CPU
        assert backend["variant"] == cpu.variant_candidates(features, backend["variants_available"])[0]
    if features.has_amx and "AMX" in backend["extra_bufts_offered"]:
        assert backend["use_extra_bufts"] is False
    assert "CPU" in backend["devices"]
    text = edge_infer("inspect", smollm2_path)
    assert "llama.cpp backend: CPU variant" in text.stdout and "extra buffer types" in text.stdout


@pytest.mark.parametrize("args, env, message", [
    (["--cpu-variant", "pentium"], {}, "unknown CPU variant 'pentium'"),
    ([], {"EDGE_INFER_CPU_VARIANT": "pentium"}, "unknown CPU variant 'pentium'"),
    ([], {"EDGE_INFER_EXTRA_BUFTS": "maybe"}, "EDGE_INFER_EXTRA_BUFTS must be one of"),
])
def test_bad_backend_settings_are_one_line_errors(smollm2_path, args, env, message):
    r = edge_infer(*args, "run", smollm2_path, "Hello", "-n", "2", env=env)
    assert r.returncode == 2 and message in r.stderr and "Traceback" not in r.stderr


def test_a_variant_the_cpu_cannot_run_is_refused_before_loading():
    """Decided from the CPU's flags before any backend is loaded: a laptop's flags, faked."""
    from edge_infer.engine.native.backend import load_backends
    from edge_infer.errors import EdgeInferError

    laptop = cpu.CpuFeatures("x86_64", cpu.X86_VARIANTS["haswell"])
    with pytest.raises(EdgeInferError, match="this CPU cannot run the 'sapphirerapids' variant"):
        load_backends("sapphirerapids", "auto", features=laptop)


def test_setup_installed_the_portable_build():
    assert {"x64", "sse42", "haswell", "skylakex", "sapphirerapids"} <= set(cpu.variants_in(_lib_dir()))


def test_the_lowest_variant_forced_answers(smollm2_path):
    r = edge_infer("--cpu-variant", "x64", "run", smollm2_path, "The capital of France is", "-n", "4",
                   "--temperature", "0")
    assert r.returncode == 0 and r.stdout.strip(), r.stderr[-2000:]


@pytest.mark.skipif(not shutil.which("qemu-x86_64"),
                    reason="qemu-user is not installed (.ci/run installs it; apt-get install qemu-user)")
def test_the_venv_answers_on_a_haswell_cpu_under_qemu(smollm2_path):
    """A CPU with AVX2 and no AVX-512: a -march=native build from an AVX-512 machine dies
    here with SIGILL; the portable build picks its haswell variant."""
    r = edge_infer("run", smollm2_path, "Hello", "--max-tokens", "4", "--threads", "2",
                   prefix=("qemu-x86_64", "-cpu", "Haswell"), timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip()


def _lib_dir():
    from edge_infer.engine.native.backend import lib_dir
    return lib_dir()


def test_bench_compares_two_backend_settings_side_by_side(smollm2_path):
    r = edge_infer("bench", smollm2_path, "--concurrency", "1", "--requests", "2", "--max-tokens", "4",
                   "--compare-env", "EDGE_INFER_EXTRA_BUFTS=off")
    assert r.returncode == 0, r.stderr[-2000:]
    rows = [line.split()[0] for line in r.stdout.splitlines() if line.split()[:1] in (["installed"], ["compared"])]
    assert rows == ["installed", "compared"]
    bad = edge_infer("bench", smollm2_path, "--compare-env", "nonsense")
    assert bad.returncode == 2 and "KEY=VALUE" in bad.stderr
