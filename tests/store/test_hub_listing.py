"""A hub repo's listing grouped into quant levels and split files, and the MODEL spec
(repo, quant, revision): no network."""

from __future__ import annotations

from edge_infer.store.hub import HubFile, RepoListing, parse_spec


def _file(path, size=100):
    return HubFile(path, size, "ab" * 32)


def test_listing_groups_levels_and_split_files():
    listing = RepoListing("o/r", "main", "c" * 40, (
        _file("README.md"),
        _file("M-Q4_K_M.gguf", 400),
        _file("M-Q8_0-00002-of-00002.gguf", 300),
        _file("M-Q8_0-00001-of-00002.gguf", 500),
        _file("M-Q2_K-00001-of-00003.gguf", 10),          # a shard missing: left out
        _file("M-Q2_K-00003-of-00003.gguf", 10),
        _file("mmproj-M-f16.gguf", 50),                    # a vision projector, not a model
        _file("BF16/M-BF16.gguf", 1600),
    ))
    groups = {g.quant: g for g in listing.gguf_groups()}
    assert set(groups) == {"Q4_K_M", "Q8_0", "BF16"}
    q8 = groups["Q8_0"]
    assert q8.split and q8.size == 800 and [f.path for f in q8.files] == [
        "M-Q8_0-00001-of-00002.gguf", "M-Q8_0-00002-of-00002.gguf"]
    assert listing.find("q4_k")[0].quant == "Q4_K_M"


def test_parse_spec():
    assert parse_spec("o/r") == ("o/r", None, None)
    assert parse_spec("o/r:Q4_K_M") == ("o/r", "Q4_K_M", None)
    assert parse_spec("o/r@v1.0") == ("o/r", None, "v1.0")
    assert parse_spec("o/r@abc:Q8_0") == ("o/r", "Q8_0", "abc")
    assert parse_spec("o/r:Q8_0@abc") == ("o/r", "Q8_0", "abc")
