"""The model host: loaded engines, their names, settings and lifetime. Above the engine
and the store (it resolves names through the store and opens engines); below the
server, the TUI and the commands, which all get their engines from it."""

from edge_infer.host.model_host import LoadedModel, ModelHost, ModelNotLoadedError

__all__ = ["LoadedModel", "ModelHost", "ModelNotLoadedError"]
