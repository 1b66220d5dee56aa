"""The HTTP load benchmark: against our server through the CLI, its error accounting, and
the side-by-side run against llama_cpp.server when its extras are installed."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

import httpx

from edge_infer.bench.http import stream_chat


def loadtest(*args, timeout=600):
    return subprocess.run([sys.executable, "-m", "edge_infer", "loadtest", *map(str, args)],
                          capture_output=True, text=True, timeout=timeout)


def test_loadtest_any_url(served, tmp_path):
    out = tmp_path / "lt.json"
    r = loadtest(served.base, "--concurrency", "1,3", "--requests", "3", "--max-tokens", "5", "--json", out)
    assert r.returncode == 0, r.stderr
    assert "agg tok/s" in r.stdout and "TTFT p50" in r.stdout
    passes = json.loads(out.read_text())["passes"]
    assert [p["concurrency"] for p in passes] == [1, 3]
    assert all(p["errors"] == 0 and p["requests"] == 3 and p["tokens"] == 15 for p in passes)


def test_loadtest_over_the_socket(served):
    r = loadtest("--socket", served.socket, "--concurrency", "2", "--requests", "2", "--max-tokens", "3")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[1].split()[:5] == ["server", "2", "2", "0", "6"]


def sse_client(lines: list[str]) -> httpx.AsyncClient:
    body = "".join(f"{line}\n\n" for line in lines).encode()
    return httpx.AsyncClient(base_url="http://test/v1", transport=httpx.MockTransport(
        lambda request: httpx.Response(200, content=body, headers={"content-type": "text/event-stream"})))


def chunk(delta: dict, finish=None) -> str:
    return "data: " + json.dumps({"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})


def test_stream_accounting():
    async def run(lines):
        async with sse_client(lines) as c:
            return await stream_chat(c, "m", "q", 8)

    ok = asyncio.run(run([chunk({"role": "assistant"}), chunk({"content": "a"}), chunk({"content": "b"}),
                          chunk({}, "length"), "data: [DONE]"]))
    assert ok.error is None and ok.tokens == 2
    usage = 'data: {"choices": [], "usage": {"completion_tokens": 7}}'
    assert asyncio.run(run([chunk({"content": "ab"}, "stop"), usage, "data: [DONE]"])).tokens == 7
    # A stream cut short (llama_cpp.server does this to a request when a newer one arrives).
    cut = asyncio.run(run([chunk({"role": "assistant"}), "data: [DONE]"]))
    assert cut.error and "finish_reason" in cut.error
    err = asyncio.run(run(["event: error", 'data: {"error": {"message": "boom"}}']))
    assert err.error and "boom" in err.error


def test_compare_with_llama_cpp_server(smollm2_path, tmp_path):
    # llama_cpp.server's extras come with the dev extra (pyproject.toml): no skip.
    import fastapi, pydantic_settings, sse_starlette, starlette_context  # noqa: E401,F401
    out = tmp_path / "cmp.json"
    r = loadtest("--compare", smollm2_path, "--baseline", "llama_cpp", "--concurrency", "2", "--requests", "2", "--max-tokens", "4",
                 "--ctx", "512", "--json", out)
    assert r.returncode == 0, r.stderr
    data = json.loads(out.read_text())
    assert data["passes"][0]["system"] == "edge-infer" and data["baseline"][0]["system"] == "llama_cpp"
    assert data["passes"][0]["errors"] == 0 and data["baseline"][0]["errors"] == 0
    assert "x agg" in r.stdout


def test_compare_names_a_baseline_or_a_model():
    from argparse import Namespace

    from edge_infer.commands.loadtest import _DEFAULT, _baseline_and_model

    assert _baseline_and_model(Namespace(compare=_DEFAULT, baseline=None)) == ("llama-server", None)
    assert _baseline_and_model(Namespace(compare="llama-server", baseline=None)) == ("llama-server", None)
    assert _baseline_and_model(Namespace(compare="smollm2", baseline="llama_cpp")) == ("llama_cpp", "smollm2")
    try:
        _baseline_and_model(Namespace(compare="llama_cpp", baseline="llama-server"))
    except SystemExit as exc:
        assert "disagree" in str(exc)
    else:
        raise AssertionError("contradicting --compare/--baseline accepted")


def test_llama_server_gets_edge_infers_buffer_types(monkeypatch):
    """The baseline runs with the CPU buffer types edge-infer chose here (no repack where
    edge-infer turns extra buffer types off, e.g. on AMX), with -c as the slots' total."""
    from edge_infer.bench import llama_server

    for ours_uses, repack_flag in ((True, False), (False, True)):
        monkeypatch.setattr(llama_server, "edge_infer_uses_extra_bufts", lambda v=ours_uses: v)
        srv = llama_server.process("/opt/ls/llama-server", "m.gguf", 2, 8192, 8, 128)
        assert ("--no-repack" in srv.argv) is repack_flag
        argv = " ".join(srv.argv)
        assert "-c 8192 -np 8" in argv and "-t 2 -tb 2" in argv and "-fa auto" in argv
        assert srv.env["LD_LIBRARY_PATH"] == "/opt/ls"
