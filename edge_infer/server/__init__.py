"""OpenAI-compatible HTTP over TCP or a Unix socket, on an engine's public API only."""

from edge_infer.server.app import create_app

__all__ = ["create_app"]
