"""The host's default seams that need no engine."""

from __future__ import annotations

from edge_infer.host.seams import model_identity
from edge_infer.store.store import ModelStore


def test_a_store_model_is_known_by_its_manifest_sha256_and_a_loose_file_by_nothing(tmp_path):
    folder = tmp_path / "models" / "tiny-q8_0"
    folder.mkdir(parents=True)
    model = folder / "tiny.gguf"
    model.write_bytes(b"GGUF" + bytes(60))
    assert model_identity(model) is None  # no manifest yet: the engine falls back to size and time
    ModelStore(tmp_path / "models").record(model, name="tiny", quant="Q8_0", source="import", sha256="ab" * 32)
    assert model_identity(model) == "ab" * 32
    other = folder / "other.gguf"  # beside it, but not the file its manifest names
    other.write_bytes(b"GGUF")
    assert model_identity(other) is None


def test_an_auto_prompt_cache_is_a_share_of_the_models_budget():
    """serve --models-budget 2GiB must still hold the model it was given: the auto RAM tier
    follows the budget, not the whole machine (whose tenth may be larger than the budget)."""
    from pathlib import Path

    from edge_infer.config import EngineSettings
    from edge_infer.host.model_config import ModelsConfig
    from edge_infer.host.residency import Footprint
    from edge_infer.host.sources import Source
    from edge_infer.host.templates import resident_template
    from edge_infer.units import GiB, MiB

    source = Source(Path("/m/smol.gguf"), "smol")

    def cache_mib(settings, budget_ram):
        made = resident_template(source, settings, False, ModelsConfig(), 0, lambda p, s: Footprint(0), budget_ram)
        return made.settings.prompt_cache_mib

    assert cache_mib(EngineSettings(), 2 * GiB) == 256        # a tenth is 205 MiB: the floor
    assert cache_mib(EngineSettings(), 40 * GiB) == 4 * GiB // MiB
    assert cache_mib(EngineSettings(prompt_cache_mib=64), 2 * GiB) == 64  # given: as given
    assert 0 < cache_mib(EngineSettings(), None)              # no budget: the machine's RAM
