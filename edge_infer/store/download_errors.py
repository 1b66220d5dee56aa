"""Why a download did not complete: the errors of the download path (download.py raises
them, partials.py the busy one), in a module of their own so both can use them."""

from __future__ import annotations

from edge_infer.errors import EdgeInferError


class DownloadError(EdgeInferError):
    """A download that could not complete (network, server, retries exhausted)."""


class DiskFullError(DownloadError):
    """Not enough free disk space: checked before starting, and ENOSPC while writing."""


class ChecksumError(DownloadError):
    """The downloaded bytes do not have the sha256 the hub published; nothing is installed."""


class DownloadBusyError(DownloadError):
    """Another process is downloading the same file right now."""
