"""Run llama.cpp's own server tests (tools/server/tests in the vendored llama.cpp) against
`edge-infer serve`. A dev tool: never run by `make test`, not collected by pytest.

    .venv/bin/python packaging/llama_server_tests.py                      # all not-slow files
    .venv/bin/python packaging/llama_server_tests.py --files test_tokenize.py test_basic.py
    .venv/bin/python packaging/llama_server_tests.py --repo /tmp/before   # another checkout's code

What it does:
- copies tools/server/tests to a temporary folder (the sdist stays untouched) and writes two
  files there: `wget.py` (utils.py imports wget for downloads; this machine is offline and no
  test file needs it) and a conftest addition that imports this module and calls `install()`;
- `install()` replaces `ServerProcess.start` and `ServerPreset.load_all` (which downloads the
  Hugging Face presets): start runs `python -m edge_infer serve MODEL --port P ...` with
  cwd=--repo (so that checkout's code is imported) and the preset's flags mapped to serve's:
  n_ctx -> --ctx (per slot: n_ctx / n_slots, as llama-server splits it unless kv_unified),
  n_slots -> --parallel, n_batch -> --n-batch, n_threads -> --threads, ctk/ctv ->
  --cache-type-k/v, fa -> --flash-attn, api_key -> --api-key, cors_origins -> --cors-origin,
  chat_template_file -> --chat-template-file; always --disk-cache 0 (llama-server keeps nothing
  on disk between runs). Models: stories/tinyllama presets and the router -> smollm2, the
  infill preset -> qwen-coder, bert/jina embedding and rerank presets -> smollm2, tinygemma3 ->
  gemma3. Flags serve lacks (--n-predict, --temp, --seed, --pooling, --ubatch-size, --slots,
  --reranking, ...) are left out and recorded; the report lists them;
- a server whose command line equals the previous test's is kept running between tests
  (`--fresh` restarts it for every test, as llama.cpp's harness does; about 7 s each here);
- runs pytest per file (`-m "not slow"`, SLOW_TESTS unset, pytest-timeout per test, a time box
  per file) and prints: file | passed | failed | errors | skipped, then the recorded flags;
- `--rewrite-model` (a diagnostic, not for the counts): requests sent through the harness name
  the served model, so that failures issue 53's any-name mapping hides show.

Needs nothing beyond the dev venv (pytest, pytest-timeout, requests, openai, numpy, filelock,
jsonschema): the tests' requirements.txt also lists aiohttp (no test imports it), wget
(stubbed, see above) and pytest-xdist (not used: one file at a time on a small machine).
Tests that download media or extra models from Hugging Face fail offline; counted as failed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

HERE = Path(__file__).resolve().parent
SDIST_TESTS = Path("/work/sdist/llama_cpp_python-0.3.36/vendor/llama.cpp/tools/server/tests")

# HF preset (repo or file, matched as a substring) -> installed edge-infer model.
MODEL_MAP = [("infill", "qwen-coder"), ("bert", "smollm2"), ("jina", "smollm2"),
             ("gemma3", "gemma3"), ("stories", "smollm2"), ("tinyllama", "smollm2")]
DEFAULT_MODEL = "smollm2"

# ServerProcess attributes serve has no flag for, with the value llama-server's harness treats
# as "not given".
UNMAPPED = {"n_predict": None, "n_ubatch": None, "pooling": None, "server_reranking": False,
            "server_slots": False, "slot_save_path": None, "n_ga": None, "n_ga_w": None,
            "lora_files": None, "enable_ctx_shift": False, "spec_type": None,
            "model_draft": None, "models_dir": None, "models_max": None, "models_preset": None,
            "no_models_autoload": None, "reasoning_format": None, "reasoning": None,
            "chat_template": None, "mmproj_url": None, "media_path": None,
            "sleep_idle_seconds": None, "cache_ram": None, "no_cache_idle_slots": False,
            "ui_mcp_proxy": False, "backend_sampling": False, "gcp_compat": False,
            "server_tools": None, "mcp_servers_config": None, "mcp_servers_json": None,
            "model_tags": None, "model_url": None, "model_file": None}

_warm: dict = {"argv": None, "process": None}


def pick_model(server) -> str:
    names = " ".join(str(x) for x in (server.model_hf_repo, server.model_hf_file,
                                       server.model_alias) if x)
    for needle, model in MODEL_MAP:
        if needle in names:
            return model
    return DEFAULT_MODEL


def _template_file(server) -> str | None:
    """llama.cpp's tests name templates relative to tools/server/tests in the source tree."""
    name = server.chat_template_file
    if name is None or os.path.isabs(name):
        return name
    return str((Path(os.environ.get("EI_LST_TESTS", SDIST_TESTS)) / name).resolve())


def serve_argv(server) -> tuple[list[str], list[str]]:
    """The serve command for a ServerProcess, and the llama-server flags left out."""
    argv = [sys.executable, "-m", "edge_infer", "serve", pick_model(server),
            "--port", str(server.server_port), "--disk-cache", "0", "--log-level", "warning"]
    hosts = server.server_host.split(",")
    argv += ["--host", hosts[0].strip()]
    skipped = [f"host={server.server_host}"] if len(hosts) > 1 else []
    slots = server.n_slots
    if server.n_ctx:
        per_seq = server.n_ctx if server.kv_unified or not slots else server.n_ctx // slots
        argv += ["--ctx", str(per_seq)]
    pairs = [(slots, "--parallel"), (server.n_batch, "--n-batch"),
             (server.n_threads, "--threads"), (server.n_gpu_layer, "--n-gpu-layers"),
             (server.ctk, "--cache-type-k"), (server.ctv, "--cache-type-v"),
             (server.api_key, "--api-key"), (_template_file(server), "--chat-template-file")]
    argv += [x for value, flag in pairs if value is not None for x in (flag, str(value))]
    if server.fa is not None:
        argv += ["--flash-attn", {"1": "on", "0": "off"}.get(str(server.fa), str(server.fa))]
    for origin in (server.cors_origins or "").split(","):
        if origin.strip():
            argv += ["--cors-origin", origin.strip()]
    skipped += [f"{name}={getattr(server, name)!r}" for name, unset in UNMAPPED.items()
                if getattr(server, name, unset) not in (unset, None, False)]
    if server.temperature != 0.8 or server.seed != 42:
        skipped.append(f"temp={server.temperature} seed={server.seed}")
    return argv, skipped


def _record(test: str, skipped: list[str]) -> None:
    path = os.environ.get("EI_LST_RECORD")
    if path and skipped:
        with open(path, "a") as f:
            f.write(json.dumps({"test": test, "skipped": skipped}) + "\n")


def _stop_warm() -> None:
    proc = _warm["process"]
    if proc is not None and proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    _warm.update(argv=None, process=None)


def install(utils) -> None:
    """Patch llama.cpp's harness (its utils module) to start edge-infer serve."""
    import atexit
    import requests

    fresh = os.environ.get("EI_LST_FRESH") == "1"
    repo = os.environ.get("EI_LST_REPO") or str(HERE.parent)
    atexit.register(_stop_warm)

    def start(self, timeout_seconds: int = utils.DEFAULT_HTTP_TIMEOUT) -> None:
        argv, skipped = serve_argv(self)
        self._served_model = argv[4]
        _record(os.environ.get("PYTEST_CURRENT_TEST", "?"), skipped)
        print("tests: starting edge-infer with:", " ".join(argv[1:]))
        alive = _warm["process"] is not None and _warm["process"].poll() is None
        if not fresh and alive and _warm["argv"] == argv:
            self.process = _warm["process"]
        else:
            _stop_warm()
            self.process = subprocess.Popen(argv, cwd=repo, stdout=sys.stdout, stderr=sys.stdout)
            _warm.update(argv=argv, process=self.process)
        utils.server_instances.add(self)
        deadline = time.time() + max(timeout_seconds, 120)  # loading on 2 busy cores
        while time.time() < deadline:
            try:
                if requests.get(self.make_url("/health"), timeout=5).status_code == 200:
                    self.ready = True
                    return
            except requests.RequestException:
                pass
            if self.process.poll() is not None:
                raise RuntimeError(f"serve exited with code {self.process.returncode}")
            time.sleep(0.05)
        raise TimeoutError(f"serve did not answer /health within {timeout_seconds} s")

    def stop(self) -> None:
        utils.server_instances.discard(self)
        if fresh or self.process is None or self.process.poll() is not None:
            _stop_warm()
        self.process = None

    if os.environ.get("EI_LST_REWRITE_MODEL") == "1":
        # Diagnostic (--rewrite-model): any model name a request sends becomes the served
        # model's, so that what issue 53's name mapping hides can be seen.
        for name in ("make_request", "make_stream_request"):
            original = getattr(utils.ServerProcess, name)

            def rewritten(self, method, path, data=None, *a, _original=original, **kw):
                if isinstance(data, dict) and "model" in data:
                    data = {**data, "model": self._served_model}
                return _original(self, method, path, data, *a, **kw)
            setattr(utils.ServerProcess, name, rewritten)

    utils.ServerProcess.start = start
    utils.ServerProcess.stop = stop
    utils.ServerPreset.load_all = staticmethod(lambda: None)


CONFTEST_ADDITION = """
# Added by edge-infer's packaging/llama_server_tests.py: serve stands in for llama-server.
import sys as _sys
_sys.path.insert(0, {here!r})
import utils as _utils
import llama_server_tests as _edge_infer_shim
_edge_infer_shim.install(_utils)
"""


def prepare(src: Path, dest: Path) -> None:
    shutil.copytree(src, dest, ignore=shutil.ignore_patterns("__pycache__", "tmp"))
    (dest / "tmp").mkdir()  # the harness's download folder; some tests write presets there
    (dest / "wget.py").write_text("def download(url, out=None):\n"
                                  "    raise RuntimeError('offline: ' + url)\n")
    with open(dest / "conftest.py", "a") as f:
        f.write(CONFTEST_ADDITION.format(here=str(HERE)))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def count(junit: Path) -> dict:
    totals = {"passed": 0, "failed": 0, "errors": 0, "skipped": 0, "cases": []}
    if not junit.exists():
        return totals
    for case in ET.parse(junit).getroot().iter("testcase"):
        kinds = [child.tag for child in case]
        kind = ("failed" if "failure" in kinds else "errors" if "error" in kinds
                else "skipped" if "skipped" in kinds else "passed")
        totals[kind] += 1
        detail = next((c.get("message", "") for c in case if c.tag in ("failure", "error")), "")
        totals["cases"].append({"name": case.get("name"), "outcome": kind,
                                "message": detail[:400]})
    return totals


def run_file(work: Path, name: str, args, env: dict) -> dict:
    junit = work / f"{name}.xml"
    cmd = [sys.executable, "-m", "pytest", f"unit/{name}", "-m", "not slow", "-q", "-rfE",
           "-p", "no:cacheprovider", f"--timeout={args.test_timeout}", f"--junitxml={junit}"]
    log = work / f"{name}.log"
    with open(log, "w") as out:
        try:
            subprocess.run(cmd, cwd=work, env=env, stdout=out, stderr=subprocess.STDOUT,
                           timeout=args.file_timeout)
            timed_out = False
        except subprocess.TimeoutExpired:
            timed_out = True
    result = count(junit)
    result.update(file=name, timed_out=timed_out, log=str(log))
    return result


def table(results: list[dict]) -> str:
    rows = ["| file | passed | failed | errors | skipped |", "|---|---|---|---|---|"]
    total = {"passed": 0, "failed": 0, "errors": 0, "skipped": 0}
    for r in results:
        note = " (time box)" if r["timed_out"] else ""
        rows.append(f"| {r['file']}{note} | {r['passed']} | {r['failed']} | {r['errors']} "
                    f"| {r['skipped']} |")
        for k in total:
            total[k] += r[k]
    rows.append(f"| **total** | {total['passed']} | {total['failed']} | {total['errors']} "
                f"| {total['skipped']} |")
    return "\n".join(rows)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tests", type=Path, default=SDIST_TESTS, help="llama.cpp's tools/server/tests")
    p.add_argument("--repo", type=Path, default=HERE.parent,
                   help="checkout whose edge_infer serves (cwd of `python -m edge_infer`)")
    p.add_argument("--files", nargs="*", help="test files (default: every unit/test_*.py)")
    p.add_argument("--fresh", action="store_true", help="a new serve process for every test")
    p.add_argument("--test-timeout", type=int, default=120, help="seconds per test")
    p.add_argument("--file-timeout", type=int, default=900, help="seconds per file")
    p.add_argument("--rewrite-model", action="store_true",
                   help="diagnostic: send every request's 'model' as the served model's name")
    p.add_argument("--json", type=Path, help="write the per-test outcomes here")
    p.add_argument("--keep", action="store_true", help="keep the temporary folder (logs)")
    args = p.parse_args()

    work = Path(tempfile.mkdtemp(prefix="llama_server_tests_")) / "tests"
    prepare(args.tests, work)
    record = work / "unmapped.jsonl"
    env = {k: v for k, v in os.environ.items() if k not in ("SLOW_TESTS", "DEBUG_EXTERNAL")}
    env.update(EI_LST_REPO=str(args.repo.resolve()), EI_LST_TESTS=str(args.tests.resolve()),
               EI_LST_RECORD=str(record), EI_LST_REWRITE_MODEL="1" if args.rewrite_model else "0",
               EI_LST_FRESH="1" if args.fresh else "0", PORT=str(free_port()))
    files = args.files or sorted(f.name for f in (work / "unit").glob("test_*.py"))
    results = []
    for name in files:
        started = time.time()
        results.append(run_file(work, name, args, env))
        r = results[-1]
        print(f"{name}: {r['passed']} passed, {r['failed']} failed, {r['errors']} errors, "
              f"{r['skipped']} skipped ({time.time() - started:.0f} s)", flush=True)
    print(f"\nedge-infer from {args.repo.resolve()}\n" + table(results))
    if record.exists():
        flags = sorted({s for line in record.read_text().splitlines()
                        for s in json.loads(line)["skipped"]})
        print("\nllama-server settings serve has no flag for (left out):\n  " + "\n  ".join(flags))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    print(f"\nlogs: {work}" if args.keep else "")
    if not args.keep:
        shutil.rmtree(work.parent, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
