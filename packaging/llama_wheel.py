"""Build (once) and install the llama-cpp-python wheel edge-infer runs on.

    python packaging/llama_wheel.py            # install the portable build into this Python
    python packaging/llama_wheel.py --print    # show the flags, the cache key and the wheel dir
    python packaging/llama_wheel.py --native   # this CPU only (-march=native): for `bench` comparisons
    python packaging/llama_wheel.py --gpu vulkan   # the same wheel, plus a GPU plug-in beside it

Why not `pip install llama-cpp-python`: llama.cpp then builds with GGML_NATIVE (the build
CPU's instructions), so a venv or a binary made on an AVX-512 machine dies with SIGILL on
a laptop without it. The portable build (GGML_BACKEND_DL + GGML_CPU_ALL_VARIANTS) ships one
CPU backend per ISA level and edge-infer loads the best one at run time (engine/native/cpu.py).
pip's wheel cache does not key on CMAKE_ARGS, so wheels live in a folder of our own named
by a hash of everything that shapes the build (wheel_cache.py); a different flag set never
reuses a wheel.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from wheel_cache import PACKAGE, VERSION, cache_key, wheel_root  # noqa: E402  (same folder)


def cmake_flags(native: bool = False, system: str | None = None, machine: str | None = None) -> list[str]:
    """CMake flags for this platform's CPU wheel. GPU backends are plug-ins built apart
    (packaging/gpu_plugin.py); EDGE_INFER_CMAKE_ARGS adds anything else (and becomes part
    of the cache key)."""
    system = system or platform.system()
    machine = (machine or platform.machine()).lower()
    if native:
        flags = ["-DGGML_NATIVE=ON"]
    elif system == "Darwin":
        # Apple silicon: every M-series chip runs the same arm64 build; Metal does the work.
        flags = ["-DGGML_NATIVE=OFF", "-DGGML_METAL=ON"]
        if machine == "x86_64":
            flags += ["-DGGML_METAL=OFF", "-DGGML_AVX=ON", "-DGGML_AVX2=ON", "-DGGML_FMA=ON", "-DGGML_F16C=ON"]
    elif machine in ("x86_64", "amd64", "aarch64", "arm64"):
        # One CPU backend library per ISA level (x86: x64 ... sapphirerapids; arm64:
        # armv8.0 ... armv9.2), installed next to libllama where edge-infer loads it from.
        flags = ["-DGGML_NATIVE=OFF", "-DGGML_BACKEND_DL=ON", "-DGGML_CPU_ALL_VARIANTS=ON",
                 "-DCMAKE_INSTALL_BINDIR=llama_cpp/lib"]
    else:
        flags = ["-DGGML_NATIVE=OFF"]
    # ggml's own threadpool instead of OpenMP. With OpenMP every thread that runs a graph gets
    # an OpenMP team of its own, for the thread's life; two such threads (a warm-up on the
    # loading thread, a second model, an embedding call) make libgomp count more threads than
    # CPUs and sleep at every barrier between ops (1-token decode 14-16 ms instead of 9-11 on
    # SmolLM2, 2 cores), and the threadpool's poll, which the engine turns down while other
    # programs are busy (engine/cpu_share.py), is ignored. llama-server shares these libraries.
    flags.append("-DGGML_OPENMP=OFF")
    flags += os.environ.get("EDGE_INFER_CMAKE_ARGS", "").split()
    return flags


def built_wheel(flags: list[str]) -> Path:
    """The wheel for these flags: from the cache, or built now (minutes) into it."""
    folder = wheel_root() / cache_key(flags)
    wheels = sorted(folder.glob("llama_cpp_python-*.whl"))
    if wheels:
        return wheels[-1]
    print(f"building {PACKAGE} {VERSION} with {' '.join(flags)} (several minutes, once)", flush=True)
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=folder.parent, prefix=".build-"))
    try:
        env = {**os.environ, "CMAKE_ARGS": " ".join(flags),
               "CMAKE_BUILD_PARALLEL_LEVEL": os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL", str(os.cpu_count() or 2))}
        subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-cache-dir",
                        "--no-binary", PACKAGE, "-w", str(tmp), f"{PACKAGE}=={VERSION}"], env=env, check=True)
        (tmp / "flags.txt").write_text(" ".join(flags) + "\n")
        tmp.rename(folder)  # whole or not at all: a killed build leaves no half wheel
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return sorted(folder.glob("llama_cpp_python-*.whl"))[-1]


def install(wheel: Path, key: str, target: Path | None) -> None:
    """Install the wheel into this Python (or --target) unless the same key is in place."""
    marker = (target or Path(sys.prefix)) / ".edge-infer-llama-wheel"
    if marker.exists() and marker.read_text().strip() == key:
        return
    cmd = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--force-reinstall", str(wheel)]
    if target:
        cmd += ["--target", str(target)]
    subprocess.run(cmd, check=True)
    marker.write_text(key + "\n")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--native", action="store_true", help="build for this CPU only (comparison builds)")
    p.add_argument("--print", action="store_true", help="print flags, key and wheel folder; build nothing")
    p.add_argument("--wheel-only", action="store_true", help="build or find the wheel, print its path")
    p.add_argument("--target", type=Path, help="install into this folder instead of this Python")
    p.add_argument("--gpu", choices=["cuda", "vulkan"], default=os.environ.get("EDGE_INFER_GPU") or None,
                   help="also build (once) and install this GPU backend plug-in (default: $EDGE_INFER_GPU)")
    args = p.parse_args(argv)
    flags = cmake_flags(native=args.native)
    key = cache_key(flags)
    if args.print:
        print(f"flags  {' '.join(flags)}\nkey    {key}\nfolder {wheel_root() / key}")
        return 0
    wheel = built_wheel(flags)
    if args.wheel_only:
        print(wheel)
        return 0
    install(wheel, key, args.target)
    if args.gpu:
        import gpu_plugin  # beside this file

        lib_dir = args.target / "llama_cpp" / "lib" if args.target else None
        print(f"installed {gpu_plugin.install(args.gpu, lib_dir)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
