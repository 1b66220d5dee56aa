"""Where models come from and live: the catalog, GGUF headers, package mirrors and
the installed-model store. Knows nothing of the engine, server or TUI."""

from edge_infer.store.catalog import Catalog, CatalogFile, CatalogModel, Mirror, load_catalog
from edge_infer.store.gguf_info import ModelInfo, read_model_info
from edge_infer.store.store import InstalledModel, ModelStore

__all__ = [
    "Catalog", "CatalogFile", "CatalogModel", "Mirror", "load_catalog",
    "ModelInfo", "read_model_info", "InstalledModel", "ModelStore",
]
