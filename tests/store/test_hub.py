"""The model manager against a local hub serving the real SmolLM2 (and Gemma 3) bytes:
listings and verdicts from range reads only, resumable verified downloads, atomic
installs, catalog fallback. Every byte the hub sends is counted."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import time
from collections import namedtuple
from pathlib import Path

import pytest

from edge_infer import cli
from edge_infer.store import download
from edge_infer.store.store import ModelStore
from tests.store.conftest import GEMMA_REPO, SMOL_FILE, SMOL_REPO, SPLIT_REPO


def cdn_gets(hub, sha=None):
    return [r for r in hub.requests if r["path"].startswith("/cdn/") and r["method"] == "GET"
            and (sha is None or r["path"].endswith(sha))]


def smol_blob(hub):
    return hub.repos[SMOL_REPO].files[SMOL_FILE]


# -- browsing -----------------------------------------------------------------------------

def test_search_lists_gguf_repos(smol_hub, capsys):
    smol_hub.add_repo("someone/not-a-gguf-model", {"model.safetensors": b"x"}, tags=["safetensors"])
    assert cli.main(["search", "smollm2"]) == 0
    out = capsys.readouterr().out
    assert SMOL_REPO in out and SPLIT_REPO in out and "not-a-gguf" not in out
    assert out.index(SMOL_REPO) < out.index(SPLIT_REPO)  # most downloaded first


def test_quants_from_range_reads_only(smol_hub, fixed_machine, capsys, edge_home):
    fixed_machine(ram_gib=0.5)
    assert cli.main(["quants", SMOL_REPO, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    levels = {lv["quant"]: lv for lv in out["levels"]}
    assert set(levels) == {"F16", "Q8_0", "Q4_1", "Q2_K"}  # mmproj is not a model
    assert levels["Q4_1"]["size"] == smol_blob(smol_hub).size
    assert out["model"]["architecture"] == "llama" and out["model"]["block_count"] == 30
    # 0.5 GiB of RAM (the plan counts a 128 MiB prompt cache): the small levels fit, F16 does not.
    assert levels["Q2_K"]["ram"] == "fits" and levels["F16"]["ram"] == "does not fit"
    assert levels["F16"]["ram_need"] > levels["Q8_0"]["ram_need"] > levels["Q4_1"]["ram_need"]
    # Only the header of one level was read, by range requests: ~2 MiB of a 94 MiB file.
    served = smol_hub.served()
    assert served == out["header_bytes_read"] and 0 < served <= 4 << 20
    assert served < smol_blob(smol_hub).size / 20
    assert all(r["range"] for r in cdn_gets(smol_hub))
    assert out["recommended"] != "F16" and levels[out["recommended"]]["ram"] == "fits"


def test_quants_table_split_file_is_one_entry(smol_hub, fixed_machine, capsys, edge_home):
    fixed_machine(ram_gib=16)
    assert cli.main(["quants", SPLIT_REPO]) == 0
    out = capsys.readouterr().out
    [row] = [line for line in out.splitlines() if line.startswith("Q4_1")]
    assert "-00001-of-00002.gguf" in row and "(+1 more parts)" in row and "fits" in row
    assert "nothing downloaded" in out
    # Both shards' headers were read (each lists its own tensors), nothing else.
    blobs = smol_hub.repos[SPLIT_REPO].files.values()
    assert smol_hub.served() < sum(b.size for b in blobs) / 20


def test_quants_grows_the_range_for_a_large_header(hub, gemma3_path, fixed_machine, capsys, edge_home):
    """Gemma 3's header holds a 262k-token vocabulary (~6 MiB): read in growing ranges."""
    hub.add_repo(GEMMA_REPO, {gemma3_path.name: gemma3_path})
    fixed_machine(ram_gib=16)
    assert cli.main(["quants", GEMMA_REPO, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["model"]["architecture"] == "gemma3" and out["model"]["sliding_window"] == 512
    gets = cdn_gets(hub)
    assert len(gets) >= 3 and gets[0]["start"] == 0
    assert all(b["start"] == a["end"] for a, b in zip(gets, gets[1:]))  # never the same byte twice
    assert 6 << 20 < hub.served() <= 8 << 20 < gemma3_path.stat().st_size


def test_listing_falls_back_to_the_tree_for_sizes_and_sha256(smol_hub, edge_home):
    from edge_infer.store.hub import HubClient

    smol_hub.no_blobs = True
    listing = HubClient().listing(SMOL_REPO)
    by_path = {f.path: f for f in listing.files}
    assert by_path[SMOL_FILE].sha256 == smol_blob(smol_hub).sha256
    assert by_path[SMOL_FILE].size == smol_blob(smol_hub).size
    assert any("/tree/" in r["path"] for r in smol_hub.requests)


def test_quants_unknown_repo_and_revision(smol_hub, capsys, edge_home):
    assert cli.main(["quants", "nobody/nothing-GGUF"]) == 2
    assert "no such repository" in capsys.readouterr().err
    assert cli.main(["quants", f"{SMOL_REPO}@v9"]) == 2
    assert "no such revision" in capsys.readouterr().err


# -- pulling --------------------------------------------------------------------------------

def test_pull_installs_verified_with_manifest(smol_hub, smollm2_path, edge_home, capsys):
    assert cli.main(["pull", f"{SMOL_REPO}:Q4_1"]) == 0
    out = capsys.readouterr().out
    size = smol_blob(smol_hub).size
    assert f"installed {SMOL_REPO}:Q4_1" in out and "verified" in out
    assert "100%" in out  # plain progress lines: stdout is not a terminal here
    assert smol_hub.served() == size
    [m] = ModelStore().installed()
    manifest = json.loads((m.path.parent / "manifest.json").read_text())
    assert manifest["repo"] == SMOL_REPO and manifest["quant"] == "Q4_1" and manifest["source"] == "hub"
    assert manifest["revision"] == smol_hub.repos[SMOL_REPO].commit
    assert manifest["file"] == SMOL_FILE and manifest["size"] == size
    assert manifest["sha256"] == smol_blob(smol_hub).sha256
    assert m.path.read_bytes() == smollm2_path.read_bytes()
    assert not list((edge_home / "models" / ".partial").glob("*.part"))
    # Names: repo:QUANT resolves; a second pull downloads nothing.
    assert ModelStore().resolve(f"{SMOL_REPO}:Q4_1") == m.path
    smol_hub.reset_counters()
    assert cli.main(["pull", f"{SMOL_REPO}:q4_1"]) == 0
    assert "already installed" in capsys.readouterr().out and smol_hub.served() == 0


def test_pull_without_quant_takes_the_best_that_fits(smol_hub, machine, edge_home, monkeypatch):
    from edge_infer.plan import cache_sizes
    from edge_infer.store.hub import HubClient
    from edge_infer.store.pull import Puller, level_fits

    # The RAM sizes below are built from the levels' needs; an auto prompt cache (a share of
    # the RAM) would move the needs with them: a fixed one keeps the arithmetic plain.
    monkeypatch.setattr(cache_sizes, "prompt_cache_bytes", lambda mib, ram_available=None: 128 * 2**20)

    client = HubClient()
    listing = client.listing(SMOL_REPO)
    needs = {lf.group.quant: lf.fit.ram_need
             for lf in level_fits(client, listing, listing.gguf_groups(), machine(64))}
    # RAM where Q4_1 fits with room and Q8_0 only tightly: Q4_1 is the best that fits.
    ram = needs["Q4_1"] / 0.8 * 1.01
    assert needs["Q8_0"] > ram * 0.8
    said = []
    puller = Puller(client=client, machine=machine(ram / 2**30), say=said.append)
    result = puller.pull(SMOL_REPO)
    assert result.model.quant == "Q4_1" and "chose Q4_1" in said[0]
    # With plenty of RAM: Q8_0 (F16 is never the automatic choice when smaller levels exist).
    from edge_infer.store.pull import choose_level

    roomy = level_fits(client, listing, listing.gguf_groups(), machine(64))
    assert choose_level(roomy).group.quant == "Q8_0"


def test_dropped_connection_resumes_with_a_range_request(smol_hub, edge_home, capsys):
    blob = smol_blob(smol_hub)
    third = blob.size // 3
    smol_hub.fault(blob.sha256, drop_at=third, times=1)
    assert cli.main(["pull", f"{SMOL_REPO}:Q4_1"]) == 0
    gets = cdn_gets(smol_hub, blob.sha256)
    assert [g["start"] for g in gets] == [0, third]
    assert smol_hub.served(blob.sha256) == blob.size  # nothing sent twice
    assert ModelStore().installed()[0].sha256 == blob.sha256


def test_server_errors_are_retried_with_backoff(smol_hub, edge_home):
    from edge_infer.store.pull import Puller

    smol_hub.fail_status = [503, 503]
    waits = []
    puller = Puller(say=lambda m: None, downloader_options={"sleep": waits.append, "backoff": 0.5})
    result = puller.pull(f"{SMOL_REPO}:Q4_1")
    assert result.model.quant == "Q4_1"
    assert len(waits) == 2 and 0.3 < waits[0] < 0.7 and 0.7 < waits[1] < 1.3  # doubling, with jitter
    assert [r["status"] for r in cdn_gets(smol_hub)][:3] == [503, 503, 200]


def _partial(edge_home, sha) -> Path:
    return edge_home / "models" / ".partial" / f"{sha}.part"


def test_killed_pull_resumes_from_its_partial_file(smol_hub, edge_home, capsys):
    blob = smol_blob(smol_hub)
    half = blob.size // 2
    smol_hub.fault(blob.sha256, stall_at=half, times=1)
    proc = subprocess.Popen([sys.executable, "-m", "edge_infer", "pull", f"{SMOL_REPO}:Q4_1"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=Path(__file__).parents[2])
    part = _partial(edge_home, blob.sha256)
    deadline = time.monotonic() + 120
    while not (part.exists() and part.stat().st_size >= half):
        assert proc.poll() is None, proc.stdout.read().decode()
        assert time.monotonic() < deadline, "the download never reached half"
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    smol_hub.release()
    first = smol_hub.served(blob.sha256)
    assert first == half
    # A killed download is not a model; `list` says it can be resumed.
    assert ModelStore().installed() == []
    assert cli.main(["list"]) == 0
    assert "unfinished download" in capsys.readouterr().out

    smol_hub.reset_counters()
    assert cli.main(["pull", f"{SMOL_REPO}:Q4_1"]) == 0
    out = capsys.readouterr().out
    assert "resuming" in out
    second = smol_hub.served(blob.sha256)
    assert second == blob.size - half
    assert [g["range"] for g in cdn_gets(smol_hub, blob.sha256)] == [f"bytes={half}-"]
    [m] = ModelStore().installed()
    assert m.sha256 == blob.sha256
    print(f"\nkill at 50%: first run served {first} bytes, resumed run {second} "
          f"of {blob.size} ({100 * second / blob.size:.1f}%)", file=sys.stderr)


def test_two_pulls_of_the_same_file_cannot_run_at_once(smol_hub, edge_home, capsys):
    """The partial's lock: while one pull writes a file, a second pull of it and
    `rm --partials` are refused at once; the first then finishes untouched."""
    import threading

    from edge_infer.store.pull import Puller

    blob = smol_blob(smol_hub)
    half = blob.size // 2
    smol_hub.fault(blob.sha256, stall_at=half, times=1)
    first = {}
    worker = threading.Thread(target=lambda: first.update(
        result=Puller(say=lambda m: None).pull(f"{SMOL_REPO}:Q4_1")))
    worker.start()
    part = _partial(edge_home, blob.sha256)
    deadline = time.monotonic() + 120
    while not (part.exists() and part.stat().st_size >= half):
        assert worker.is_alive() and time.monotonic() < deadline, "the first pull never reached half"
        time.sleep(0.05)
    try:
        assert cli.main(["pull", f"{SMOL_REPO}:Q4_1"]) == 2
        err = capsys.readouterr().err
        assert f"another edge-infer process is downloading {blob.sha256} right now" in err
        assert cli.main(["rm", "--partials", "--yes"]) == 2
        assert "is downloading" in capsys.readouterr().err and part.exists()
    finally:
        smol_hub.release()
        worker.join(120)
    assert first["result"].model.sha256 == blob.sha256
    assert [m.sha256 for m in ModelStore().installed()] == [blob.sha256]
    assert smol_hub.served(blob.sha256) == blob.size  # the refused pull fetched nothing


def test_corrupted_bytes_fail_verification_and_install_nothing(smol_hub, edge_home, capsys):
    blob = smol_blob(smol_hub)
    smol_hub.fault(blob.sha256, corrupt_at=blob.size // 2)
    assert cli.main(["pull", f"{SMOL_REPO}:Q4_1"]) == 2
    err = capsys.readouterr().err
    assert "failed verification" in err and blob.sha256 in err and "nothing was installed" in err
    assert ModelStore().installed() == []
    assert not _partial(edge_home, blob.sha256).exists()  # damaged bytes are not kept to resume from
    assert not list((edge_home / "models").glob("*/manifest.json"))


def test_full_disk_is_refused_before_downloading(smol_hub, edge_home, capsys, monkeypatch):
    Usage = namedtuple("Usage", "total used free")
    monkeypatch.setattr(download.shutil, "disk_usage", lambda p: Usage(10 << 30, (10 << 30) - (50 << 20), 50 << 20))
    assert cli.main(["pull", f"{SMOL_REPO}:Q4_1"]) == 2
    err = capsys.readouterr().err
    assert "not enough free disk space" in err and "nothing was installed" in err
    assert "93.8 MiB" in err and "50.0 MiB free" in err
    assert smol_hub.served() == 0 and ModelStore().installed() == []


def test_disk_filling_up_while_writing(smol_hub, edge_home, capsys, monkeypatch):
    blob = smol_blob(smol_hub)
    real_write = download._write_chunk
    written = [0]

    def write_until_full(fh, data):
        if written[0] + len(data) > 40 << 20:
            raise OSError(errno.ENOSPC, "No space left on device")
        real_write(fh, data)
        written[0] += len(data)

    monkeypatch.setattr(download, "_write_chunk", write_until_full)
    assert cli.main(["pull", f"{SMOL_REPO}:Q4_1"]) == 2
    err = capsys.readouterr().err
    assert "disk filled up" in err and "resumes" in err
    assert ModelStore().installed() == []
    assert _partial(edge_home, blob.sha256).stat().st_size == written[0]
    # Space freed: the next pull continues from the partial file.
    monkeypatch.setattr(download, "_write_chunk", real_write)
    smol_hub.reset_counters()
    assert cli.main(["pull", f"{SMOL_REPO}:Q4_1"]) == 0
    assert smol_hub.served(blob.sha256) == blob.size - written[0]


def test_split_gguf_installs_and_loads(smol_hub, smol_split, smollm2_path, edge_home, capsys):
    from edge_infer.config import EngineSettings
    from edge_infer.engine import Engine, Request, SamplingParams
    from edge_infer.gguf.info import read_model_info

    assert cli.main(["pull", f"{SPLIT_REPO}:Q4_1"]) == 0
    store = ModelStore()
    [m] = store.installed()
    assert len(m.parts) == 2 and m.size == sum(p.stat().st_size for p in smol_split)
    assert sorted(p.name for p in m.path.parent.glob("*.gguf")) == [p.name for p in smol_split]
    assert read_model_info(m.path).weights_bytes == read_model_info(smollm2_path).weights_bytes
    settings = EngineSettings(ctx=256, parallel=1, n_threads=2)
    greedy = SamplingParams(temperature=0.0, max_tokens=8)
    with Engine(store.resolve(f"{SPLIT_REPO}:Q4_1"), settings) as split:
        got = split.generate(Request(prompt="The capital of France is", sampling=greedy)).tokens
    with Engine(smollm2_path, settings) as whole:
        want = whole.generate(Request(prompt="The capital of France is", sampling=greedy)).tokens
    assert got == want and len(got) == 8
    # A missing shard makes the model damaged, not loadable.
    (m.path.parent / smol_split[1].name).unlink()
    assert ModelStore().installed() == []


# -- catalog models -------------------------------------------------------------------------

def test_catalog_model_from_the_hub(hub, tiny_mirror, edge_home, capsys):
    hub.add_repo("edge-infer/tiny-test-GGUF", {"tiny-test.F32.gguf": tiny_mirror.data})
    assert cli.main(["pull", "tiny"]) == 0
    out = capsys.readouterr().out
    assert "installed tiny:F32" in out and "from hub" in out
    store = ModelStore()
    found = store.lookup("tiny")  # the catalog's own lookup sees it: same folder, same sha256
    assert found is not None and found.source == "hub" and found.path.read_bytes() == tiny_mirror.data


def test_catalog_model_refuses_a_hub_file_that_differs(hub, tiny_mirror, edge_home, capsys):
    hub.add_repo("edge-infer/tiny-test-GGUF", {"tiny-test.F32.gguf": tiny_mirror.data + b"\0" * 32})
    assert cli.main(["pull", "tiny"]) == 2
    assert "not the file the catalog pins" in capsys.readouterr().err
    assert ModelStore().installed() == []


def test_catalog_model_falls_back_to_its_mirror_when_the_hub_is_unreachable(
        tiny_mirror, edge_home, capsys, monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens there
    t0 = time.monotonic()
    assert cli.main(["pull", "tiny"]) == 0
    out = capsys.readouterr().out
    assert "cannot reach the Hugging Face Hub" in out and "falling back to the package mirror" in out
    assert ModelStore().lookup("tiny").source == "mirror"
    assert time.monotonic() - t0 < 30


def test_unreachable_hub_for_a_hub_repo_is_a_clear_error(edge_home, capsys, monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    assert cli.main(["pull", "someone/some-model-GGUF:Q4_K_M"]) == 2
    err = capsys.readouterr().err
    assert "cannot reach the Hugging Face Hub at http://127.0.0.1:9" in err and "Traceback" not in err


def test_a_server_without_range_support(smol_hub, fixed_machine, edge_home, capsys):
    """Header reads stop reading once they have the header; a resume starts over (and says so)."""
    blob = smol_blob(smol_hub)
    smol_hub.ignore_range = True
    fixed_machine(ram_gib=16)
    assert cli.main(["quants", SMOL_REPO, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["model"]["block_count"] == 30
    smol_hub.ignore_range = False
    smol_hub.fault(blob.sha256, drop_at=blob.size // 2, times=1)
    smol_hub.ignore_range = True
    smol_hub.reset_counters()
    assert cli.main(["pull", f"{SMOL_REPO}:Q4_1"]) == 0
    assert "ignored the Range request; starting over" in capsys.readouterr().err
    assert smol_hub.served(blob.sha256) == blob.size + blob.size // 2
    assert ModelStore().installed()[0].sha256 == blob.sha256


def test_split_model_resume_keeps_the_verified_shard(smol_hub, smol_split, edge_home, capsys):
    files = smol_hub.repos[SPLIT_REPO].files
    first, second = (files[p.name] for p in smol_split)
    smol_hub.fault(second.sha256, corrupt_at=10)
    assert cli.main(["pull", f"{SPLIT_REPO}:Q4_1"]) == 2
    assert "failed verification" in capsys.readouterr().err
    assert ModelStore().installed() == []
    smol_hub.faults.clear()
    smol_hub.reset_counters()
    assert cli.main(["pull", f"{SPLIT_REPO}:Q4_1"]) == 0
    assert smol_hub.served(first.sha256) == 0 and smol_hub.served(second.sha256) == second.size
    assert not list((edge_home / "models" / ".partial").iterdir())


def test_rm_partials_deletes_an_unfinished_download(smol_hub, edge_home, capsys, monkeypatch):
    import io

    from edge_infer.store.download import DownloadError
    from edge_infer.store.partials import list_partials
    from edge_infer.store.pull import Puller

    blob = smol_blob(smol_hub)
    smol_hub.fault(blob.sha256, drop_at=blob.size // 3)
    # The connection drops at a third, then the server keeps failing: the pull gives up.
    puller = Puller(say=lambda m: None, downloader_options={
        "sleep": lambda s: smol_hub.fail_status.extend([503] * 3), "retries": 1})
    with pytest.raises(DownloadError, match="are kept"):
        puller.pull(f"{SMOL_REPO}:Q4_1")
    smol_hub.fail_status.clear()
    [partial] = list_partials(ModelStore().root)
    assert partial.have == blob.size // 3 and partial.part.exists()

    monkeypatch.setattr("sys.stdin", io.StringIO(""))  # nobody to ask: refused
    assert cli.main(["rm", "--partials"]) == 2
    assert "pass --yes" in capsys.readouterr().err and partial.part.exists()
    assert cli.main(["rm", "--partials", "--yes"]) == 0
    assert "deleted the unfinished download" in capsys.readouterr().out
    assert list_partials(ModelStore().root) == [] and not partial.part.exists()
    assert cli.main(["rm", "--partials"]) == 0
    assert "no unfinished downloads" in capsys.readouterr().out
    assert cli.main(["rm"]) == 2
    assert "pass --partials" in capsys.readouterr().err


def test_a_hub_file_name_that_climbs_out_is_refused(hub, smollm2_path, edge_home, capsys):
    """A listing is the hub's word: a name like '..\\\\x.gguf' must never become a path."""
    hub.add_repo("evil/model-GGUF", {"..\\..\\escape-Q4_1.gguf": smollm2_path})
    assert cli.main(["pull", "evil/model-GGUF:Q4_1"]) == 2
    err = capsys.readouterr().err
    assert "refusing to write it" in err and "Traceback" not in err
    assert not ModelStore().installed()
    assert not list(edge_home.rglob("escape*"))
