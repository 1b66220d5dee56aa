"""RPC workers without a model: addresses, the probe against things that are not workers,
llama.cpp's buffer lines for workers, the config key, the worker's refusals."""

import socket
import threading

import pytest

from edge_infer.cli import main
from edge_infer.engine.child import portable
from edge_infer.engine.native.load_report import device_buffers
from edge_infer.engine.devices.rpc import parse_endpoints, probe
from edge_infer.errors import EdgeInferError, WorkerError
from edge_infer.host.model_config import ModelConfigError, load_models_config
from edge_infer.units import MiB


def test_addresses_are_checked():
    assert parse_endpoints("a:1, b:50052,a:1") == ("a:1", "b:50052")
    assert parse_endpoints(["[::1]:50052"]) == ("[::1]:50052",)
    for bad in ("a", "a:", ":50052", "a:99999", "a:x"):
        with pytest.raises(WorkerError, match="HOST:PORT"):
            parse_endpoints(bad)


def serve_once(answer: bytes) -> int:
    """A TCP server that answers `answer` to the first connection, then closes it."""
    srv = socket.create_server(("127.0.0.1", 0))

    def run():
        conn, _ = srv.accept()
        conn.recv(64)
        conn.sendall(answer)
        conn.close()
        srv.close()

    threading.Thread(target=run, daemon=True).start()
    return srv.getsockname()[1]


def test_the_probe_names_what_is_not_a_worker():
    port = serve_once(b"HTTP/1.1 400 Bad Request\r\n\r\n")
    with pytest.raises(WorkerError, match=f"worker 127.0.0.1:{port} answered command 14 with .* not an RPC worker"):
        probe(f"127.0.0.1:{port}")
    port = serve_once(b"")
    with pytest.raises(WorkerError, match="closed the connection during the handshake"):
        probe(f"127.0.0.1:{port}")


def test_llama_cpps_buffers_on_a_worker_are_its_own():
    lines = ["load_tensors: RPC0[10.0.0.2:50052] model buffer size =    50.00 MiB\n",
             "load_tensors: RPC0[10.0.0.3:50052] model buffer size =    40.00 MiB\n",
             "llama_kv_cache: RPC0[10.0.0.2:50052] KV buffer size =     9.00 MiB\n",
             "load_tensors:   CPU_Mapped model buffer size =    28.00 MiB\n"]
    got = device_buffers(lines)
    assert got["rpc:10.0.0.2:50052"] == {"model": 50 * MiB, "KV": 9 * MiB}
    assert got["rpc:10.0.0.3:50052"] == {"model": 40 * MiB} and got["CPU"] == {"model": 28 * MiB}


def test_the_models_config_takes_workers(tmp_path):
    path = tmp_path / "models.toml"
    path.write_text('[models.big]\nrpc = ["10.0.0.2:50052", "10.0.0.3:50052"]\nctx = 2048\n')
    entry = load_models_config(path).models["big"]
    from edge_infer.config import EngineSettings
    assert entry.apply(EngineSettings()).rpc == ("10.0.0.2:50052", "10.0.0.3:50052")
    path.write_text('[models.big]\nrpc = ["10.0.0.2"]\n')
    with pytest.raises(ModelConfigError, match="models.big.rpc.*HOST:PORT"):
        load_models_config(path)


def test_a_worker_listens_beyond_loopback_only_when_told(capsys):
    assert main(["worker", "--host", "0.0.0.0", "--port", "1"]) == 2
    err = capsys.readouterr().err
    assert "refusing to listen on 0.0.0.0" in err and "SSH tunnel or a VPN" in err and "--allow-network" in err
    assert main(["worker", "--mem", "lots"]) == 2
    assert "--mem" in capsys.readouterr().err


def test_an_exception_that_cannot_cross_the_pipe_becomes_one_line():
    class Odd(Exception):
        def __init__(self, a, b):
            super().__init__(f"{a}-{b}")

    got = portable(Odd(1, 2))
    assert isinstance(got, EdgeInferError) and str(got) == "Odd: 1-2"
    ours = WorkerError("worker x does not answer")
    assert portable(ours) is ours
