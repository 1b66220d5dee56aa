"""The model host: loaded engines, their names, settings, memory and lifetime. Above the
engine and the store (it resolves names through the store and opens engines); below the
server, the TUI and the commands, which all get their engines from it."""

from edge_infer.host.entries import ModelEntry
from edge_infer.host.keep_alive import FOREVER, KeepAliveError, parse_keep_alive
from edge_infer.host.model_host import HostBusyError, ModelDoesNotFitError, ModelHost, ModelNotLoadedError
from edge_infer.host.resident import Lease, Resident
from edge_infer.host.residency import Budget, Footprint

__all__ = ["FOREVER", "Budget", "Footprint", "HostBusyError", "KeepAliveError", "Lease",
           "ModelDoesNotFitError", "ModelEntry", "ModelHost", "ModelNotLoadedError", "Resident", "parse_keep_alive"]
