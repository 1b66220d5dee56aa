"""Per-model load settings from a small TOML file: what needs a reload to change (context,
slots, KV types, GPU layers) is set per model, once; sampling stays per request.

    # ~/.config/edge-infer/models.toml (or --models-config FILE)
    [defaults]
    keep_alive = "30m"

    [models.gemma3]          # a name, alias or alias:QUANT a request may use
    ctx = 8192
    parallel = 2
    cache_type_k = "q8_0"
    chat_template = "~/templates/gemma-tools.jinja"   # instead of the GGUF's own
    keep_alive = -1          # stay until memory is needed
    pin = true               # never unloaded to make room

    [models.big]             # served elsewhere (vLLM, llama-server, Ollama, edge-infer)
    remote = ["http://gpu-box:8000/v1", "http://gpu-box-2:8000/v1"]
    remote_model = "Qwen/Qwen2.5-72B-Instruct"   # its name there (default: this name)
    api_key_env = "BIG_API_KEY"                  # or api_key_file = "~/.config/big.key"

    [server]
    allowed_hosts = ["llm.example.com"]      # Host names besides loopback (serve's --allowed-host)

Unknown keys and bad values are refused when the server starts, naming the key.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path
from typing import Literal

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from edge_infer.errors import EdgeInferError
from edge_infer.host.keep_alive import KeepAliveError, parse_keep_alive
from edge_infer.plan.kv_types import KV_TYPES


class ModelConfigError(EdgeInferError):
    pass


def _seconds(value) -> float | None:
    if value is None:
        return None
    try:
        return parse_keep_alive(value)
    except KeepAliveError as exc:
        raise ValueError(str(exc)) from None


REMOTE_KEYS = ("remote", "remote_model", "api_key_env", "api_key_file", "timeout", "health_interval")


class ModelEntry(BaseModel):
    """One [models.NAME] table: load-time engine settings plus residency."""
    model_config = ConfigDict(extra="forbid")

    ctx: int | None = Field(None, ge=64)
    parallel: int | None = Field(None, ge=1, le=256)
    threads: int | None = Field(None, ge=1)
    n_gpu_layers: int | None = Field(None, ge=-1)
    n_batch: int | None = Field(None, ge=1)
    flash_attn: Literal["auto", "on", "off"] | None = None
    cache_type_k: str | None = None
    cache_type_v: str | None = None
    kv_budget: str | None = None
    prompt_cache_mib: int | None = Field(None, ge=-1)  # -1: auto
    disk_cache: str | None = None  # "2GiB", "0" = off
    draft_max: int | None = Field(None, ge=0)
    chat_template: str | None = None  # a Jinja chat template file instead of the model's own
    rpc: list[str] | None = None      # workers (host:port) that hold some of its layers
    keep_alive: float | None = None  # seconds (FOREVER = until memory is needed)
    pin: bool = False
    # A model served elsewhere (remote.RemoteModel): its base URLs, its name there, a key.
    remote: list[str] | None = Field(None, min_length=1)
    remote_model: str | None = None
    api_key_env: str | None = None
    api_key_file: str | None = None
    timeout: float | None = Field(None, gt=0)          # seconds a remote request may take
    health_interval: float | None = Field(None, gt=0)  # seconds between a remote's health checks

    @field_validator("remote")
    @classmethod
    def _urls(cls, v):
        for url in v or ():
            if not url.startswith(("http://", "https://")) or len(url) < 10:
                raise ValueError(f"{url!r} is not an http:// or https:// URL")
        return v

    @model_validator(mode="after")
    def _remote_or_local(self):
        remote_only = REMOTE_KEYS[1:]
        if self.remote is None:
            given = [k for k in remote_only if getattr(self, k) is not None]
            if given:
                raise ValueError(f"{', '.join(given)} only apply with remote = [URL, ...]")
            return self
        local = [k for k in type(self).model_fields if k not in (*remote_only, "remote")
                 and getattr(self, k) not in (None, False)]
        if local:
            raise ValueError(f"a remote model is loaded elsewhere: {', '.join(local)} do not apply to it")
        if self.api_key_env and self.api_key_file:
            raise ValueError("give api_key_env or api_key_file, not both")
        return self

    @field_validator("cache_type_k", "cache_type_v")
    @classmethod
    def _kv_type(cls, v):
        if v is not None and v not in KV_TYPES:
            raise ValueError(f"must be one of {', '.join(KV_TYPES)}")
        return v

    @field_validator("keep_alive", mode="before")
    @classmethod
    def _keep_alive(cls, v):
        return _seconds(v)

    @field_validator("rpc")
    @classmethod
    def _workers(cls, v):
        from edge_infer.engine.devices.rpc import parse_endpoints

        try:
            return list(parse_endpoints(v)) if v is not None else None
        except EdgeInferError as exc:
            raise ValueError(str(exc)) from None

    @field_validator("disk_cache")
    @classmethod
    def _disk_cache(cls, v):
        from edge_infer.errors import EdgeInferError
        from edge_infer.plan.cache_sizes import disk_cache_bytes

        try:
            if v is not None:
                disk_cache_bytes(v, Path("."), disk_free=0)
        except EdgeInferError as exc:
            raise ValueError(str(exc)) from None
        return v

    def apply(self, settings):
        """EngineSettings with this entry's load-time keys over `settings`."""
        values = {"n_threads" if k == "threads" else k: tuple(v) if k == "rpc" else v
                  for k, v in self.model_dump(exclude={"keep_alive", "pin", *REMOTE_KEYS}).items() if v is not None}
        return replace(settings, **values)


class Defaults(BaseModel):
    model_config = ConfigDict(extra="forbid")
    keep_alive: float | None = None

    @field_validator("keep_alive", mode="before")
    @classmethod
    def _keep_alive(cls, v):
        return _seconds(v)


class ServerSection(BaseModel):
    """The [server] table: what `serve` adds to its flags (server.door)."""
    model_config = ConfigDict(extra="forbid")
    allowed_hosts: list[str] = []  # Host names answered besides loopback; "*": any (a reverse proxy)


class ModelsConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    defaults: Defaults = Defaults()
    server: ServerSection = ServerSection()
    models: dict[str, ModelEntry] = {}

    def entry_for(self, *names: str) -> ModelEntry | None:
        """The table for the first of `names` (served name, alias, label) that has one."""
        lowered = {k.lower(): v for k, v in self.models.items()}
        for name in names:
            if name and name.lower() in lowered:
                return lowered[name.lower()]
        return None


def load_models_config(path: Path | None, required: bool = False) -> ModelsConfig:
    """The config at `path`; an empty one when it does not exist (unless `required`)."""
    if path is None or not path.exists():
        if required and path is not None:
            raise ModelConfigError(f"the models config {path} does not exist")
        return ModelsConfig()
    data = load_toml(path, "models config")
    try:
        return ModelsConfig.model_validate(data)
    except ValidationError as exc:
        raise ModelConfigError(f"{path}: {one_line(exc)}") from None


def load_toml(path: Path, what: str, error: type[EdgeInferError] = ModelConfigError) -> dict:
    """The TOML at `path` as a dict; `error` with one line naming the file and `what` it is."""
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise error(f"cannot read the {what} {path}: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise error(f"{path} is not valid TOML: {exc}") from None


def one_line(exc: ValidationError) -> str:
    """A pydantic error as one line: 'keys.0.scopes.0: Input should be ...; ...'."""
    return "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
