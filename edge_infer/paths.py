"""Where edge-infer keeps things. One place, platformdirs-based, frozen-binary aware.

EDGE_INFER_HOME overrides the data dir (tests use it to isolate a user's store).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import platformdirs

APP_NAME = "edge-infer"


def data_dir() -> Path:
    override = os.environ.get("EDGE_INFER_HOME")
    if override:
        return Path(override).expanduser()
    return Path(platformdirs.user_data_dir(APP_NAME, appauthor=False))


def kv_cache_dir() -> Path:
    """Saved KV states (the prompt cache's disk tier): a cache, safe to delete."""
    override = os.environ.get("EDGE_INFER_KV_CACHE")
    if override:
        return Path(override).expanduser()
    return Path(platformdirs.user_cache_dir(APP_NAME, appauthor=False)) / "kv"


def rpc_cache_dir() -> Path:
    """A worker's copies of the weights clients sent it (`edge-infer worker`): a second load of
    the same model sends hashes instead of gigabytes. A cache, safe to delete."""
    override = os.environ.get("EDGE_INFER_RPC_CACHE")
    if override:
        return Path(override).expanduser()
    return Path(platformdirs.user_cache_dir(APP_NAME, appauthor=False)) / "rpc"


def models_dir() -> Path:
    """Installed models live here, one folder per model, with a manifest."""
    override = os.environ.get("EDGE_INFER_MODELS")
    if override:
        return Path(override).expanduser()
    return data_dir() / "models"


def resource_root() -> Path:
    """Root that holds `models/catalog.toml`: the bundle dir when frozen, else the source tree."""
    if getattr(sys, "frozen", False):
        return Path(getattr(sys, "_MEIPASS", Path(sys.executable).parent))
    return Path(__file__).resolve().parent.parent


def catalog_path() -> Path:
    override = os.environ.get("EDGE_INFER_CATALOG")
    if override:
        return Path(override)
    return resource_root() / "models" / "catalog.toml"


def models_config_path() -> Path:
    """Per-model load settings for `serve` (host/model_config.py): EDGE_INFER_MODELS_CONFIG
    or models.toml in the user's config folder."""
    override = os.environ.get("EDGE_INFER_MODELS_CONFIG")
    if override:
        return Path(override).expanduser()
    if os.environ.get("EDGE_INFER_HOME"):  # an isolated home (tests) reads no user config
        return data_dir() / "models.toml"
    return Path(platformdirs.user_config_dir(APP_NAME, appauthor=False)) / "models.toml"
