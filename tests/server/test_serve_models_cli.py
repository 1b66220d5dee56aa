"""`serve`'s many-model flags from the command line: bad values are clear errors before
anything loads; a server started with a budget and a models config says what it serves."""

from __future__ import annotations

import subprocess
import sys
import time

import httpx
import pytest

from tests.server.conftest import short_socket_path


def serve(*args, **kw):
    return subprocess.Popen([sys.executable, "-m", "edge_infer", "serve", *map(str, args)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


@pytest.mark.parametrize("flags, message", [
    (["--models-budget", "lots"], "--models-budget 'lots': give a size like 512MiB"),
    (["--keep-alive", "soon"], "keep_alive 'soon' is not a duration"),
    (["--max-models", "-1"], "--max-models must be 0"),
    (["--models-config", "/nonexistent/models.toml"], "the models config /nonexistent/models.toml does not exist"),
])
def test_bad_model_flags_are_clear_errors(smollm2_path, flags, message):
    p = serve(smollm2_path, "--socket", short_socket_path(), *flags)
    _, err = p.communicate(timeout=60)
    assert p.returncode != 0 and message in err and "Traceback" not in err


def test_a_bad_models_config_names_the_key(smollm2_path, tmp_path):
    config = tmp_path / "models.toml"
    config.write_text("[models.smollm2]\nctx = 'big'\n")
    p = serve(smollm2_path, "--socket", short_socket_path(), "--models-config", config)
    _, err = p.communicate(timeout=60)
    assert p.returncode != 0 and "models.smollm2.ctx" in err and "Traceback" not in err


def test_the_models_config_sets_the_served_models_context(smollm2_path, tmp_path):
    config = tmp_path / "models.toml"
    config.write_text(f'[models."{smollm2_path.stem}"]\nctx = 768\nparallel = 2\n')
    path = short_socket_path()
    log = tmp_path / "serve.log"
    with open(log, "w") as out:  # a file, not a pipe: a full pipe would block the server's logging
        p = subprocess.Popen([sys.executable, "-m", "edge_infer", "serve", smollm2_path, "--socket", path,
                              "--models-config", config, "--models-budget", "2GiB", "--keep-alive", "10m",
                              "--threads", "2"], stdout=out, stderr=subprocess.STDOUT, text=True)
    try:
        for _ in range(600):
            if "Ctrl-C stops" in log.read_text() or p.poll() is not None:
                break
            time.sleep(0.1)
        assert "2 slots x 768 tokens" in log.read_text()
        with httpx.Client(transport=httpx.HTTPTransport(uds=path), base_url="http://x", timeout=120) as c:
            card = c.get("/v1/models").json()["data"][0]
            assert card["id"] == smollm2_path.stem and card["status"]["value"] == "loaded"
            assert c.post("/v1/completions", json={"prompt": "Hi", "max_tokens": 2}).status_code == 200
            assert c.get(f"/v1/models/{smollm2_path.stem}").json()["status"]["expires_in"] > 590
    finally:
        p.terminate()
        p.communicate(timeout=30)
