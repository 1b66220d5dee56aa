"""Hostile GGUF files (issue 47, item 5): the header reader refuses what breaks a limit with
one line naming the field, before llama.cpp, `inspect`, `list`, the planner or a load sees
the file. Every case below is a clear refusal or a file that parses: no crash, no hang, no
read past the file (the reader works on exactly the file's bytes, and a read past them would
surface as a struct error in the message), bounded memory."""

from __future__ import annotations

import random
import struct
import subprocess
import sys

import pytest

from edge_infer.errors import ModelFileError
from edge_infer.gguf.header import read_header
from edge_infer.gguf.limits import MAX_ARRAY_ITEMS, MAX_STRING_BYTES, GGUFLimitError
from tests.gguf.hostile import (ARRAY, F32, I32, STRING, T_Q4_0, U8, U64, base_kvs, craft,
                                field_mutations, good_file, judge, judge_prefix, kv, kv_str, kv_u32, patch, s,
                                tensor)
from tests.hardening.corrupt_gguf import _alignment, parse
from tests.store.conftest import hub  # noqa: F401 (a fixture: the local hub, HF_ENDPOINT at it)

CASE_SECONDS = 2.0       # per case, with a 262k-token Gemma header to walk
PEAK_BYTES = 4 << 20     # tracemalloc peak for a file that declares a huge count


def assert_clear(v, name: str) -> None:
    assert v.seconds < CASE_SECONDS, (name, v.seconds)
    if v.ok:
        return
    assert "\n" not in v.message and len(v.message) < 400, (name, v.message)
    # A read past the bytes would be a struct / index error, never one of our lines.
    for leak in ("unpack", "buffer", "index out of range", "Traceback"):
        assert leak not in v.message, (name, v.message)


# ---- crafted files: each refused, naming its field -------------------------------------------
def nested_arrays(depth: int) -> bytes:
    return struct.pack("<I", ARRAY) + b"".join(struct.pack("<IQ", ARRAY, 1) for _ in range(depth))


CRAFTED = {
    "n_dims 5": ([], [tensor("t", (1, 1, 1, 1, 1))], "n_dims"),
    "dim negative as int64": ([], [tensor("t", (2**63,))], "dims[0]"),
    "elements overflow int64": ([], [tensor("t", (2**32, 2**32))], "shape"),
    "bytes overflow int64": ([], [tensor("t", (2**61, 2))], "shape"),
    "tensor type 43": ([], [tensor("t", (8,), ttype=43)], "type"),
    "tensor type 4 (removed)": ([], [tensor("t", (8,), ttype=4)], "type"),
    "row not a block multiple": ([], [tensor("t", (31,), ttype=T_Q4_0)], "dims[0]"),
    "offset not aligned": ([], [tensor("a", (8,)), tensor("b", (8,), offset=33)], "'b' offset"),
    "offsets overlap": ([], [tensor("a", (8,)), tensor("b", (8,), offset=0)], "'b' offset"),
    "tensor name 64 bytes": ([], [tensor("x" * 64, (8,))], "tensor 0 name"),
    "tensor name twice": ([], [tensor("a", (8,)), tensor("a", (8,), offset=32)], "tensor 'a'"),
    "key empty": ([kv_u32("", 1)], [], "key 4"),
    "key twice": ([kv_u32("a.b", 1), kv_u32("a.b", 2)], [], "'a.b'"),
    "key 17 MiB long": ([struct.pack("<Q", MAX_STRING_BYTES + 1)], [], "key 4"),
    "string value 17 MiB": ([kv("x", STRING, struct.pack("<Q", MAX_STRING_BYTES + 1))], [], "'x'"),
    "value type 13": ([kv("x", 13, b"\0" * 8)], [], "'x'"),
    "array of arrays 10k deep": ([s("x") + nested_arrays(10_000)], [], "'x'"),
    "array type 13": ([kv("x", ARRAY, struct.pack("<IQ", 13, 1))], [], "'x'"),
    "array 64 Mi + 1 strings": ([kv("x", ARRAY, struct.pack("<IQ", STRING, MAX_ARRAY_ITEMS + 1))], [], "'x'"),
    "alignment 0": ([kv_u32("general.alignment", 0)], [], "alignment"),
    "alignment 3": ([kv_u32("general.alignment", 3)], [], "alignment"),
    "alignment as u64": ([kv("general.alignment", U64, struct.pack("<Q", 32))], [], "alignment"),
    "block_count 10^9": ([kv_u32("llama.block_count", 10**9)], [], "block_count"),
    "context_length a string": ([kv_str("llama.context_length", "long")], [], "context_length"),
    "head_count negative": ([kv("llama.attention.head_count", I32, struct.pack("<i", -4))], [], "head_count"),
    "embedding_length a float": ([kv("llama.embedding_length", F32, struct.pack("<f", 8.5))], [], "embedding_length"),
}


def key_of(entry: bytes) -> bytes | None:
    n = struct.unpack_from("<Q", entry)[0]
    return entry[8:8 + n] if n < 256 else None


def with_base(extra: list[bytes]) -> list[bytes]:
    """The base keys, less those `extra` sets again (block_count, ...), then `extra`."""
    names = {key_of(e) for e in extra}
    return [k for k in base_kvs() if key_of(k) not in names] + extra


@pytest.mark.parametrize("name", list(CRAFTED))
def test_crafted_file_is_refused_naming_its_field(name, tmp_path):
    extra, tensors, field = CRAFTED[name]
    v = judge(craft(with_base(extra), tensors, data=4096), tmp_path / "x.gguf", trace=True)
    assert_clear(v, name)
    assert not v.ok and v.limit, (name, v.message)
    assert "refused: GGUF" in v.message and field in v.message, (name, v.message)
    assert str(tmp_path / "x.gguf") in v.message
    assert v.peak_bytes < PEAK_BYTES, (name, v.peak_bytes)


@pytest.mark.parametrize("field,at", [("tensor_count", 8), ("kv_count", 16)])
@pytest.mark.parametrize("count", [2**20, 2**40, 2**63, 2**64 - 1])
def test_huge_declared_counts_allocate_nothing(field, at, count, tmp_path):
    data = patch(good_file(), at, "<Q", count)
    v = judge(data, tmp_path / "x.gguf", trace=True)
    assert not v.ok and v.limit and field in v.message, v.message
    assert v.peak_bytes < PEAK_BYTES and v.seconds < 0.5


def test_huge_declared_array_in_a_small_file_is_short_not_allocated(tmp_path):
    """Within the limits but beyond the bytes: the file is truncated (found before looping)."""
    kvs = base_kvs() + [kv("x", ARRAY, struct.pack("<IQ", STRING, MAX_ARRAY_ITEMS))]
    v = judge(craft(kvs, []), tmp_path / "x.gguf", trace=True)
    assert not v.ok and "truncated" in v.message and v.peak_bytes < PEAK_BYTES and v.seconds < 0.5


def test_a_good_crafted_file_parses_and_limits_hold_at_their_edges(tmp_path):
    assert judge(good_file(), tmp_path / "a.gguf").ok
    edge = base_kvs() + [kv("big", ARRAY, struct.pack("<IQ", U8, 5000) + b"\1" * 5000),
                         kv("strings", ARRAY, struct.pack("<IQ", STRING, 2) + s("") + s("y")),
                         kv_u32("general.alignment", 64)]
    data = craft(edge, [tensor("a", (0,)), tensor("b", (64, 1, 1, 1), ttype=T_Q4_0, offset=0),
                        tensor("c", (8,), offset=64)], data=128, align=64)
    v = judge(data, tmp_path / "b.gguf")
    assert v.ok, v.message  # a 0-sized dim and 4 dims are what llama.cpp allows


def test_offsets_past_the_end_refused_for_files_not_for_hub_prefixes(tmp_path):
    whole = craft(base_kvs(), [tensor("a", (1024,))], data=64)  # 4 KiB declared, 64 bytes there
    v = judge(whole, tmp_path / "x.gguf")
    assert not v.ok and "truncated: expected at least" in v.message
    # The hub reads only a prefix of a file it knows the size of: it cannot see the weights.
    assert judge_prefix(whole[:240], 1 << 20) == "parsed"
    assert judge_prefix(whole[:30], 1 << 20) == "more"
    hostile = patch(whole, 8, "<Q", 2**40)
    assert "refused: GGUF tensor_count" in judge_prefix(hostile[:240], 1 << 20)
    assert "refused: GGUF" in judge_prefix(craft([s("x") + nested_arrays(50)], [])[:300], 1 << 20)


# ---- mutations of the real headers ------------------------------------------------------------
def real_header(path):
    h = read_header(path)
    with open(path, "rb") as fh:
        return fh.read(h.data_offset), h.file_size


@pytest.fixture(scope="module", params=["smollm2", "gemma3"])
def real(request):
    head, size = real_header(request.getfixturevalue(f"{request.param}_path"))
    return request.param, head, size, parse(head)


def run_fields(real, tmp_path, full: bool) -> None:
    name, head, size, layout = real
    cases = field_mutations(layout, full) | {f"alignment={a}": _alignment(layout, a) for a in (0, 3, 2**31)}
    verdicts = {}
    for i, (case, data) in enumerate(cases.items()):
        grown = size + len(data) - len(head)
        v = judge(data, tmp_path / "m.gguf", size=grown)
        assert_clear(v, f"{name}: {case}")
        verdicts[case] = v
        if full or i % 4 == 0:  # the hub's reader on the same bytes
            prefix = judge_prefix(data, grown)
            assert prefix in ("parsed", "more") or "\n" not in prefix, (case, prefix)
    refused = [c for c, v in verdicts.items() if not v.ok]
    assert len(refused) > len(cases) * 0.8, [c for c, v in verdicts.items() if v.ok]
    for must in ("kv_count=18446744073709551615", "tensor_count=9223372036854775808", "version=0",
                 f"{layout.tensors[0].name}.n_dims=5", f"{layout.tensors[0].name}.type=43"):
        assert not verdicts[must].ok, must
    named = [verdicts[c].message for c in refused if verdicts[c].limit]
    assert all("refused: GGUF" in m for m in named) and len(named) > len(refused) // 2


def test_real_header_field_mutations_are_refusals_or_parse(real, tmp_path):
    run_fields(real, tmp_path, full=False)


@pytest.mark.slow
def test_every_field_mutation_of_real_headers(real, tmp_path):
    run_fields(real, tmp_path, full=True)


def random_mutations(head: bytes, n: int, seed: int):
    rng = random.Random(seed)
    for i in range(n):
        b = bytearray(head)
        for _ in range(rng.choice((1, 1, 2, 8))):
            at = rng.randrange(min(len(b), 1 << 16) if rng.random() < 0.8 else len(b))
            if rng.random() < 0.5:
                b[at] ^= 1 << rng.randrange(8)
            else:
                width = rng.choice((4, 8))
                at = min(at, len(b) - width)
                b[at:at + width] = rng.choice((b"\xff" * width, b"\0" * width, b"\x7f" + b"\xff" * (width - 1),
                                               rng.randbytes(width)))
        yield i, bytes(b)


def run_random(real, tmp_path, n: int) -> None:
    name, head, size, _ = real
    for i, data in random_mutations(head, n, seed=hash(name) & 0xFFFF):
        assert_clear(judge(data, tmp_path / "r.gguf", size=size), f"{name} mutation {i}")


def test_random_byte_mutations_of_real_headers(real, tmp_path):
    run_random(real, tmp_path, 25)


@pytest.mark.slow
def test_many_random_byte_mutations_of_real_headers(real, tmp_path):
    run_random(real, tmp_path, 1500)


# ---- the commands and the load path go through it -------------------------------------------
def refused_files(tmp_path):
    out = {}
    for name in ("n_dims 5", "array of arrays 10k deep"):
        extra, tensors, _ = CRAFTED[name]
        out[name] = tmp_path / f"{name.replace(' ', '-')}.gguf"
        out[name].write_bytes(craft(base_kvs() + extra, tensors, data=64))
    return out


def test_inspect_refuses_in_one_line(tmp_path):
    for name, path in refused_files(tmp_path).items():
        r = subprocess.run([sys.executable, "-m", "edge_infer", "inspect", str(path)], capture_output=True,
                           text=True, timeout=60)
        lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
        assert r.returncode != 0 and len(lines) == 1, (name, r.returncode, r.stderr)
        assert "refused: GGUF" in lines[0] and "Traceback" not in r.stderr, (name, r.stderr)


def test_load_refuses_before_llama_cpp(tmp_path, monkeypatch):
    from edge_infer.config import EngineSettings
    from edge_infer.engine import engine as engine_mod
    from edge_infer.engine import loading
    from edge_infer.engine.native import llama

    def never(*a, **kw):
        raise AssertionError("llama.cpp was handed a refused file")

    monkeypatch.setattr(loading, "load_model", never)
    monkeypatch.setattr(llama.LlamaModel, "__init__", never)
    for path in refused_files(tmp_path).values():
        with pytest.raises(GGUFLimitError, match="refused: GGUF"):
            engine_mod.Engine(path, EngineSettings(ctx=256, parallel=1, n_threads=1))
        with pytest.raises(ModelFileError, match="refused: GGUF"):
            from edge_infer.engine.child import ChildEngine
            ChildEngine(path, EngineSettings(ctx=256, parallel=1, n_threads=1))


def test_list_shows_an_installed_file_gone_hostile_as_damaged(tmp_path, edge_home):
    """A model installed before these limits (or altered since): `list` names the refusal,
    loading it by name is refused, and nothing crashes."""
    from edge_infer.store.importing import import_file
    from edge_infer.store.store import ModelStore
    from tests.conftest import write_tiny_gguf

    model = import_file(ModelStore(), write_tiny_gguf(tmp_path / "tiny.gguf"), progress=lambda m: None)
    hostile = refused_files(tmp_path)["n_dims 5"].read_bytes()
    size = model.path.stat().st_size
    model.path.write_bytes(hostile + b"\0" * (size - len(hostile)))  # the size its manifest says
    r = subprocess.run([sys.executable, "-m", "edge_infer", "list"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    assert "damaged" in r.stdout and "refused: GGUF" in r.stdout, r.stdout
    with pytest.raises(GGUFLimitError):
        from edge_infer.gguf.info import read_model_info
        read_model_info(ModelStore().resolve(model.label))


def test_pull_refuses_a_hostile_file_and_installs_nothing(hub, edge_home, capsys):
    """A hostile header is refused from the hub's range read, before the download; one whose
    tensors run past its end passes the range read (it cannot see the end) and is refused
    after the download, before the install, its partial removed."""
    from edge_infer import cli
    from edge_infer.store.store import ModelStore

    hostile = craft(base_kvs() + [s("x") + nested_arrays(100)], [], data=1 << 16)
    short = craft(base_kvs(), [tensor("output_norm.weight", (1 << 20,))], data=1 << 16)
    hub.add_repo("evil/hostile-GGUF", {"hostile.F32.gguf": hostile})
    hub.add_repo("evil/short-GGUF", {"short.F32.gguf": short})
    assert cli.main(["pull", "evil/hostile-GGUF:F32"]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "refused: GGUF key 'x': an array of arrays" in err[0], err
    assert cli.main(["pull", "evil/short-GGUF:F32"]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert "truncated" in err[-1] and "Traceback" not in "\n".join(err), err
    assert ModelStore().installed() == []
    assert not list((edge_home / "models" / ".partial").glob("*.part"))
