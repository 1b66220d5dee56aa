"""What the host refuses, each mapped to its own HTTP status by the server (server/leases.py)."""

from __future__ import annotations

from edge_infer.errors import EdgeInferError, ModelNotFoundError


class ModelNotLoadedError(ModelNotFoundError):
    """A request named a model this host cannot serve (the server answers 404)."""

    def __init__(self, model: str, served: list[str]):
        shown = model if len(model) <= 200 else model[:200] + "…"  # never echo megabytes back
        held = ", ".join(f"'{name}'" for name in served) or "no model (none is installed or loaded)"
        super().__init__(f"the model '{shown}' does not exist; this server serves {held}")
        self.model, self.served = model, served


class ModelDoesNotFitError(EdgeInferError):
    """Its memory plan alone is larger than the host's budget (the server answers 400)."""


class HostBusyError(EdgeInferError):
    """Too many requests wait for a model to load or for room (the server answers 503)."""
