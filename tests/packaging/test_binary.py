"""The PyInstaller binary, run like a user without Python would: clean env, empty home."""

import json
import os
import pty
import select
import shutil
import subprocess
import time

BUNDLE_FAILURES = ("ModuleNotFoundError", "No module named", "cannot open shared object", "FileNotFoundError")


def run(binary, env, *args, timeout=180, input=None):
    r = subprocess.run([str(binary), *map(str, args)], env=env, capture_output=True, text=True, timeout=timeout,
                       input=input)
    missing = [m for m in BUNDLE_FAILURES if m in r.stderr]
    assert not missing, f"something is missing from the bundle:\n{r.stderr[-3000:]}"
    return r


def curl_socket(sock, path: str, body: str | None = None) -> str:
    args = ["-H", "Content-Type: application/json", "-d", body] if body else []
    return subprocess.run(["curl", "-s", "--unix-socket", str(sock), f"http://localhost{path}", *args],
                          capture_output=True, text=True, timeout=60).stdout


def ask_once_loaded(proc, sock, body: str, timeout: float = 120) -> dict:
    """A chat completion from `serve` on `sock`, asked until it answers: the socket exists
    before the model has loaded."""
    deadline = time.monotonic() + timeout
    while True:
        assert proc.poll() is None, f"serve exited:\n{proc.stderr.read()[-3000:]}"
        assert time.monotonic() < deadline, "serve did not answer"
        if sock.exists() and (out := curl_socket(sock, "/v1/chat/completions", body)):
            return json.loads(out)
        time.sleep(0.3)


def test_version(binary, clean_env):
    r = run(binary, clean_env, "--version")
    assert r.returncode == 0 and r.stdout.startswith("edge-infer ")


def test_inspect_the_test_model(binary, clean_env, smollm2_path):
    r = run(binary, clean_env, "inspect", smollm2_path, "--json")
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout)
    assert info["model"]["architecture"] == "llama" and info["model"]["quantization"] == "Q4_1"


def test_run_a_prompt(binary, clean_env, smollm2_path):
    r = run(binary, clean_env, "run", smollm2_path, "The capital of France is", "-n", "8", "--temperature", "0")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip()


def test_finds_the_user_store_through_platformdirs(binary, clean_env, smollm2_path):
    """Same data dir as the installed package: ~/.local/share/edge-infer on Linux."""
    from edge_infer.store.store import ModelStore

    folder = os.path.join(clean_env["HOME"], ".local", "share", "edge-infer", "models", "smollm2")
    os.makedirs(folder)
    target = os.path.join(folder, smollm2_path.name)
    os.symlink(smollm2_path, target)
    ModelStore(os.path.dirname(folder)).record(target, name="SmolLM2-135M-Instruct", quant="Q4_1",
                                               source="mirror", alias="smollm2")
    r = run(binary, clean_env, "run", "smollm2", "Hello", "-n", "4")
    assert r.returncode == 0, r.stderr
    bad = run(binary, clean_env, "run", "no-such-model", "Hello")
    assert bad.returncode == 2 and "smollm2" in bad.stderr  # lists what is installed


def test_bad_model_file_is_a_clear_error(binary, clean_env, tmp_path):
    bad = tmp_path / "bad.gguf"
    bad.write_text("not a model")
    r = run(binary, clean_env, "run", bad, "hi")
    assert r.returncode == 2 and "not a GGUF file" in r.stderr and "Traceback" not in r.stderr


def test_tui_starts_in_a_terminal_and_quits(binary, clean_env, smollm2_path):
    """A real pseudo-terminal: the app draws, loads the model, and Ctrl+Q ends it cleanly."""
    pid, fd = pty.fork()
    if pid == 0:
        os.execve(str(binary), [str(binary), "tui", str(smollm2_path)], {**clean_env, "COLUMNS": "100",
                                                                         "LINES": "30"})
    screen = b""
    deadline = time.monotonic() + 120
    quit_sent = False
    status = None
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            try:
                screen += os.read(fd, 65536)
            except OSError:
                break
        if not quit_sent and b"is ready" in screen:
            os.write(fd, b"\x11")  # Ctrl+Q
            quit_sent = True
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
    else:
        os.kill(pid, 9)
        raise AssertionError(f"the app did not quit; last output: {screen[-2000:]!r}")
    assert quit_sent, f"the app never reported the model ready: {screen[-2000:]!r}"
    assert b"Chat" in screen and b"Stats" in screen
    assert os.waitstatus_to_exitcode(status) == 0
    assert not any(m.encode() in screen for m in BUNDLE_FAILURES)


def test_binary_has_no_python_dependency(binary):
    assert shutil.which("edge-infer", path="/usr/bin:/bin") is None  # not the installed one
    out = subprocess.run(["ldd", str(binary)], capture_output=True, text=True).stdout
    assert "libpython" not in out  # the interpreter is inside the bundle


def test_serve_on_a_socket_answers_a_chat_completion(binary, clean_env, smollm2_path, tmp_path):
    sock = tmp_path / "ei.sock"
    proc = subprocess.Popen([str(binary), "serve", str(smollm2_path), "--socket", str(sock), "--parallel", "2"],
                            env=clean_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        body = json.dumps({"model": smollm2_path.stem, "max_tokens": 8,
                           "messages": [{"role": "user", "content": "Say hi."}]})
        reply = ask_once_loaded(proc, sock, body)
        assert reply["choices"][0]["message"]["content"], reply
        assert reply["usage"]["completion_tokens"] > 0
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err[-2000:]
    assert not any(m in err for m in BUNDLE_FAILURES), err[-3000:]
    assert not sock.exists()  # removed on exit


def test_bundle_carries_the_cpu_variants(binary, clean_env, smollm2_path):
    """The binary is built from the portable llama.cpp: every CPU variant rides along and
    the one for this CPU is picked at run time."""
    from edge_infer.engine.native import cpu

    r = run(binary, clean_env, "inspect", smollm2_path, "--json")
    assert r.returncode == 0, r.stderr
    backend = json.loads(r.stdout)["backend"]
    assert {"x64", "sse42", "haswell", "skylakex"} <= set(backend["variants_available"])
    assert backend["variant"] == cpu.variant_candidates(cpu.read_cpu_features(), backend["variants_available"])[0]


def test_the_lowest_variant_has_no_avx512(binary, tmp_path):
    """qemu-user cannot test the binary (its bootloader re-executes itself and escapes to the
    real CPU), so check the code instead: no zmm register in the x64 variant."""
    # binutils comes with the C compiler the llama.cpp build needs: never skipped.
    assert shutil.which("objdump"), "objdump (binutils) is needed to check the x64 variant's code"
    from PyInstaller.archive.readers import CArchiveReader

    archive = CArchiveReader(str(binary))
    name = next(n for n in archive.toc if n.endswith("libggml-cpu-x64.so"))
    lib = tmp_path / "libggml-cpu-x64.so"
    lib.write_bytes(archive.extract(name))
    listing = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(lib)], capture_output=True,
                             text=True, check=True).stdout
    assert "%zmm" not in listing and "%ymm" not in listing  # x64 = SSE2 only
    assert listing.count("\n") > 10000  # it is the real backend, disassembled


def test_the_lowest_variant_forced_answers(binary, clean_env, smollm2_path):
    r = run(binary, {**clean_env, "EDGE_INFER_CPU_VARIANT": "x64"}, "inspect", smollm2_path, "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["backend"]["variant"] == "x64", r.stderr
    r = run(binary, clean_env, "--cpu-variant", "x64", "run", smollm2_path, "The capital of France is", "-n", "6",
            "--temperature", "0")
    assert r.returncode == 0 and r.stdout.strip(), r.stderr
    bad = run(binary, clean_env, "--cpu-variant", "pentium", "run", smollm2_path, "Hello")
    assert bad.returncode == 2 and "unknown CPU variant" in bad.stderr and "Traceback" not in bad.stderr


def test_a_model_on_a_worker_answers_through_the_binary(binary, clean_env, smollm2_path, tmp_path):
    """The binary carries the RPC backend: its worker lends the CPU, and its serve --rpc runs
    the model in a child process of the frozen binary (multiprocessing's spawn) on it."""
    from tests.remote.conftest import free_port
    from tests.rpc.conftest import require_rpc_plugin

    require_rpc_plugin()
    port = free_port()
    worker = subprocess.Popen([str(binary), "worker", "--port", str(port), "--threads", "1"], env=clean_env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    sock = tmp_path / "ei.sock"
    serve = None
    try:
        from edge_infer.engine.devices.rpc import probe

        deadline = time.monotonic() + 60
        while True:
            try:
                probe(f"127.0.0.1:{port}", timeout=1)
                break
            except Exception:
                assert worker.poll() is None and time.monotonic() < deadline, worker.stderr.read()[-2000:]
                time.sleep(0.2)
        serve = subprocess.Popen([str(binary), "serve", str(smollm2_path), "--socket", str(sock), "--parallel", "1",
                                  "--ctx", "512", "--threads", "1", "--rpc", f"127.0.0.1:{port}"],
                                 env=clean_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        body = json.dumps({"model": smollm2_path.stem, "max_tokens": 8,
                           "messages": [{"role": "user", "content": "Say hi."}]})
        reply = ask_once_loaded(serve, sock, body)
        assert reply["choices"][0]["message"]["content"], reply
        layers = {d["device"]: d["layers"] for d in json.loads(curl_socket(sock, "/props"))["devices"]}
        assert layers.get("RPC0", 0) > 0, layers
    finally:
        if serve is not None:
            serve.terminate()
            _, err = serve.communicate(timeout=30)
            assert not any(m in err for m in BUNDLE_FAILURES), err[-3000:]
        # SIGTERM, which the one-file binary's bootloader passes to the worker it unpacked and
        # started; SIGKILL would end the bootloader alone and leave the worker running
        worker.terminate()
        try:
            worker.wait(timeout=30)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()
