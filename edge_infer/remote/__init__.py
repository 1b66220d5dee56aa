"""Models served elsewhere (vLLM, llama-server, Ollama, another edge-infer) behind this
host's names: which base URLs serve each one, which of them answer (health checks), which
one takes the next request (least outstanding), and what each costs (latency, errors).
Below the host and the server; knows nothing of engines. The HTTP forwarding itself is
the server's (server/remote_proxy.py)."""

from edge_infer.remote.registry import RemoteModels
from edge_infer.remote.upstream import RemoteModel, Upstream

__all__ = ["RemoteModel", "RemoteModels", "Upstream"]
