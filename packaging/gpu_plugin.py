"""Build (once) a GPU backend plug-in for the installed portable llama-cpp-python.

    python packaging/gpu_plugin.py vulkan        # build or reuse libggml-vulkan.so, install it
    python packaging/gpu_plugin.py cuda          # the same for CUDA (needs nvcc)
    python packaging/gpu_plugin.py vulkan --remove
    python packaging/gpu_plugin.py vulkan --print

The portable wheel is built with GGML_BACKEND_DL: every backend is a library of its own that
ggml loads at run time. A GPU backend is therefore one more library beside the CPU variants,
built alone (GGML_CPU=OFF, one CMake target) from the same vendored llama.cpp as the wheel, so
installing or removing it never rebuilds the CPU wheel (about 12 minutes on 2 cores; a Vulkan
plug-in is about 6). Plug-ins are cached like wheels, by a hash of what shapes the build.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from wheel_cache import PACKAGE, VERSION, cache_key, wheel_root  # noqa: E402  (same folder)

BACKENDS = {
    # name: (CMake switch, target, what the user's machine needs to run it)
    "vulkan": ("-DGGML_VULKAN=ON", "ggml-vulkan", "a Vulkan 1.2 driver (GPU vendor's, or Mesa)"),
    "cuda": ("-DGGML_CUDA=ON", "ggml-cuda", "an NVIDIA driver and the CUDA runtime libraries"),
    # Not a GPU: llama.cpp's RPC backend, the client side of `serve --rpc` and the server side
    # of `edge-infer worker` (both in this one library; the worker needs no rpc-server binary).
    "rpc": ("-DGGML_RPC=ON", "ggml-rpc", "nothing: the workers are other machines running `edge-infer worker`"),
}
# What we change in the vendored source before building a plug-in; part of its cache key.
PATCHES = {"rpc": "memcap-1"}


def plugin_flags(backend: str) -> list[str]:
    switch, _, _ = BACKENDS[backend]
    # $ORIGIN: the plug-in finds the wheel's libggml-base beside it, never the build folder's.
    flags = ["-DCMAKE_BUILD_TYPE=Release", "-DGGML_NATIVE=OFF", "-DGGML_BACKEND_DL=ON", "-DGGML_CPU=OFF",
             switch, "-DBUILD_SHARED_LIBS=ON", "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF",
             "-DLLAMA_BUILD_TOOLS=OFF", "-DLLAMA_BUILD_SERVER=OFF", "-DLLAMA_CURL=OFF",
             "-DCMAKE_BUILD_WITH_INSTALL_RPATH=ON", "-DCMAKE_INSTALL_RPATH=$ORIGIN"]
    return flags + os.environ.get("EDGE_INFER_GPU_CMAKE_ARGS", "").split()


def plugin_folder(backend: str) -> Path:
    patch = [f"patch={PATCHES[backend]}"] if backend in PATCHES else []
    return wheel_root() / "plugins" / cache_key([f"plugin={backend}", *plugin_flags(backend), *patch])


def vendored_source(work: Path) -> Path:
    """The llama.cpp that the wheel was built from: the sdist of the same version (cached)."""
    src_dir = wheel_root() / "src"
    sdists = sorted(src_dir.glob(f"llama_cpp_python-{VERSION}.tar.gz"))
    if not sdists:
        src_dir.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:",
                        "-d", str(src_dir), f"{PACKAGE}=={VERSION}"], check=True)
        sdists = sorted(src_dir.glob(f"llama_cpp_python-{VERSION}.tar.gz"))
    with tarfile.open(sdists[-1]) as tar:
        tar.extractall(work, filter="data") if sys.version_info >= (3, 12) else tar.extractall(work)
    return work / f"llama_cpp_python-{VERSION}" / "vendor" / "llama.cpp"


_LAYER_SETTINGS = re.compile(
    r"(?P<head>[ \t]*std::vector<vk::LayerSettingEXT> settings = \{.*?"
    r"vk::InstanceCreateInfo instance_create_info\((?P<args>[^;]*?), &layer_setting_info\);)", re.S)


def patch_old_vulkan_headers(llama_cpp: Path) -> bool:
    """Debian 12's Vulkan headers (1.3.239) predate VK_EXT_layer_settings (header 261), which
    ggml-vulkan uses only to configure the validation layer (debug builds). Guard that block;
    the instance is created without layer settings on older headers. Returns True if patched."""
    path = llama_cpp / "ggml" / "src" / "ggml-vulkan" / "ggml-vulkan.cpp"
    text = path.read_text()
    m = _LAYER_SETTINGS.search(text)
    if not m or "VK_HEADER_VERSION >= 261" in text:
        return False
    plain = f"    vk::InstanceCreateInfo instance_create_info({m.group('args')});"
    path.write_text(text[:m.start()] + "#if VK_HEADER_VERSION >= 261\n" + m.group("head")
                    + "\n#else\n" + plain + "\n#endif" + text[m.end():])
    return True


_DEVICE_MEMORY = ("    ggml_backend_dev_memory(dev, &free, &total);\n"
                  "    response.free_mem = free;\n")


def patch_rpc_memory_cap(llama_cpp: Path) -> None:
    """`edge-infer worker --mem SIZE`: the worker reports at most SIZE (EDGE_INFER_RPC_MEM,
    bytes) as its device's total, and that less what this connection holds as free, so the
    client's plan places no more than SIZE of layers there (rpc-server once had --mem; this
    llama.cpp reports the device's own memory, with no cap)."""
    path = llama_cpp / "ggml" / "src" / "ggml-rpc" / "ggml-rpc.cpp"
    text = path.read_text()
    if _DEVICE_MEMORY not in text:
        raise SystemExit(f"{path}: the RPC server's get_device_memory changed; update patch_rpc_memory_cap")
    capped = ("    ggml_backend_dev_memory(dev, &free, &total);\n"
              "    if (const char * cap_env = std::getenv(\"EDGE_INFER_RPC_MEM\")) {  // edge-infer: worker --mem\n"
              "        const size_t cap = (size_t) std::strtoull(cap_env, nullptr, 10);\n"
              "        size_t held = 0;\n"
              "        for (auto buffer : buffers) { held += ggml_backend_buffer_get_size(buffer); }\n"
              "        if (cap > 0) { total = std::min(total, cap); free = std::min(free, cap > held ? cap - held : 0); }\n"
              "    }\n"
              "    response.free_mem = free;\n")
    path.write_text(text.replace(_DEVICE_MEMORY, capped, 1))


def library_name(backend: str) -> str:
    target = BACKENDS[backend][1]
    return {"darwin": f"lib{target}.so", "win32": f"{target}.dll"}.get(sys.platform, f"lib{target}.so")


def built_plugin(backend: str) -> Path:
    folder = plugin_folder(backend)
    found = folder / library_name(backend)
    if found.exists():
        return found
    flags = plugin_flags(backend)
    print(f"building the {backend} plug-in of llama.cpp ({VERSION}) with {' '.join(flags)} (minutes, once)",
          flush=True)
    folder.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(dir=folder.parent, prefix=".build-"))
    try:
        source = vendored_source(work)
        if backend == "vulkan" and patch_old_vulkan_headers(source):
            print("patched ggml-vulkan.cpp for Vulkan headers older than 1.3.261", flush=True)
        if backend == "rpc":
            patch_rpc_memory_cap(source)
        build = work / "build"
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL", str(os.cpu_count() or 2))
        subprocess.run(["cmake", "-S", str(source), "-B", str(build), *flags], check=True,
                       stdout=subprocess.DEVNULL)
        subprocess.run(["cmake", "--build", str(build), "--target", BACKENDS[backend][1], "-j", jobs], check=True)
        made = next(p for p in build.rglob(library_name(backend)) if p.is_file() and not p.is_symlink())
        staged = work / "out"
        staged.mkdir()
        shutil.copy2(made, staged / library_name(backend))
        (staged / "flags.txt").write_text(" ".join(flags) + "\n")
        if folder.exists():
            shutil.rmtree(folder)
        staged.rename(folder)  # whole or not at all
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return found


def installed_lib_dir() -> Path:
    """Where the installed llama_cpp package keeps libllama and the CPU variants."""
    import importlib.util

    spec = importlib.util.find_spec("llama_cpp")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("llama-cpp-python is not installed in this Python: run `make setup` first")
    return Path(list(spec.submodule_search_locations)[0]) / "lib"


def install(backend: str, lib_dir: Path | None = None) -> Path:
    lib_dir = lib_dir or installed_lib_dir()
    plugin = built_plugin(backend)
    dest = lib_dir / plugin.name
    if not dest.exists() or hashlib.sha256(dest.read_bytes()).digest() != hashlib.sha256(plugin.read_bytes()).digest():
        tmp = dest.with_suffix(".tmp")
        shutil.copy2(plugin, tmp)
        tmp.replace(dest)
    return dest


def remove(backend: str, lib_dir: Path | None = None) -> None:
    (lib_dir or installed_lib_dir()).joinpath(library_name(backend)).unlink(missing_ok=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("backend", choices=sorted(BACKENDS))
    p.add_argument("--remove", action="store_true", help="remove the installed plug-in")
    p.add_argument("--print", action="store_true", help="print flags and cache folder; build nothing")
    p.add_argument("--lib-dir", type=Path, help="install beside these CPU variants instead of this Python's")
    args = p.parse_args(argv)
    if args.print:
        print(f"flags  {' '.join(plugin_flags(args.backend))}\nfolder {plugin_folder(args.backend)}\n"
              f"needs  {BACKENDS[args.backend][2]}")
        return 0
    if args.remove:
        remove(args.backend, args.lib_dir)
        return 0
    print(f"installed {install(args.backend, args.lib_dir)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
