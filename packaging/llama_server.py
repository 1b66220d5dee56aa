"""Build (once) llama.cpp's own C++ `llama-server` from the llama.cpp that our llama-cpp-python
wheel vendors, for side-by-side benchmarks (`edge-infer bench-memory`, `loadtest --compare`).

    python packaging/llama_server.py           # build if missing, print the binary's path
    python packaging/llama_server.py --print   # the path it would have, build nothing

Same version and the same portable CMake flags as packaging/llama_wheel.py, so both load the
same CPU kernels: only the server target is compiled (a few minutes on 2 cores) and the
per-ISA CPU backends are copied from the installed wheel (identical build flags, same ABI).
Cached in ~/.cache/edge-infer/llama-server/<key>/; never built by `make test`.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import llama_wheel  # noqa: E402  (same folder: the CPU wheel's flags are shared)
import wheel_cache  # noqa: E402  (and the cache: its folder, key and version)

# No network at build time: the web UI would be fetched from the Hub, the server runs without it.
SERVER_FLAGS = ["-DLLAMA_BUILD_SERVER=ON", "-DLLAMA_BUILD_UI=OFF", "-DLLAMA_USE_PREBUILT_UI=OFF",
                "-DLLAMA_OPENSSL=OFF", "-DLLAMA_CURL=OFF", "-DLLAMA_BUILD_TESTS=OFF",
                "-DLLAMA_BUILD_EXAMPLES=OFF", "-DBUILD_SHARED_LIBS=ON",
                # The CPU backends are not compiled again: the wheel's are copied in (below).
                "-DGGML_CPU=OFF"]


def server_dir() -> Path:
    root = wheel_cache.wheel_root().parent / "llama-server"
    return root / wheel_cache.cache_key(llama_wheel.cmake_flags() + SERVER_FLAGS)


def binary_path() -> Path:
    return server_dir() / "llama-server"


def _sdist(workdir: Path) -> Path:
    subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:",
                    f"{wheel_cache.PACKAGE}=={wheel_cache.VERSION}", "-d", str(workdir)], check=True)
    return next(workdir.glob("llama_cpp_python-*.tar.gz"))


def _wheel_lib_dir() -> Path:
    import llama_cpp  # the installed portable wheel: its CPU backends are reused

    return Path(llama_cpp.__file__).parent / "lib"


def build() -> Path:
    out = server_dir()
    if binary_path().exists():
        return binary_path()
    flags = [f for f in llama_wheel.cmake_flags()
             if not f.startswith(("-DCMAKE_INSTALL_BINDIR", "-DGGML_CPU_ALL_VARIANTS"))]
    with tempfile.TemporaryDirectory(prefix="llama-server-") as tmp:
        tmp = Path(tmp)
        with tarfile.open(_sdist(tmp)) as tar:
            tar.extractall(tmp, filter="data")
        src = next(tmp.glob("llama_cpp_python-*/vendor/llama.cpp"))
        build_dir = tmp / "build"
        print(f"building llama-server {wheel_cache.VERSION} (a few minutes, once)", flush=True)
        subprocess.run(["cmake", "-S", str(src), "-B", str(build_dir), "-DCMAKE_BUILD_TYPE=Release",
                        *flags, *SERVER_FLAGS], check=True, stdout=subprocess.DEVNULL)
        jobs = str(os.cpu_count() or 2)
        subprocess.run(["cmake", "--build", str(build_dir), "--target", "llama-server", "-j", jobs],
                       check=True)
        staging = out.with_suffix(".tmp")
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        shutil.copy2(build_dir / "bin" / "llama-server", staging)
        for lib in list((build_dir / "bin").glob("*.so*")):
            shutil.copy2(lib, staging, follow_symlinks=True)
        # ggml loads its CPU variant from the executable's folder (GGML_BACKEND_DL).
        for lib in _wheel_lib_dir().glob("libggml-cpu-*.so"):
            shutil.copy2(lib, staging)
        (staging / "flags.txt").write_text("\n".join(flags + SERVER_FLAGS) + "\n")
        staging.rename(out)
    return binary_path()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--print", action="store_true", help="print the path only")
    args = ap.parse_args()
    if args.print:
        print(binary_path())
        return 0
    print(build())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
