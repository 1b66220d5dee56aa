"""Where models come from and live: the catalog, the hub, package mirrors, downloads and
the installed-model store. Reads GGUF headers through edge_infer.gguf and fits through
edge_infer.plan; knows nothing of the engine, server or TUI."""

from edge_infer.store.catalog import Catalog, CatalogFile, CatalogModel, Mirror, load_catalog
from edge_infer.store.store import InstalledModel, ModelStore

__all__ = ["Catalog", "CatalogFile", "CatalogModel", "Mirror", "load_catalog", "InstalledModel", "ModelStore"]
