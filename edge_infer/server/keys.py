"""API keys with names, scopes and models (serve --api-keys-file FILE, --api-key).

    # keys.toml
    [[keys]]
    name = "editor"                   # shown in the request log and /metrics, never the key
    key_env = "EDITOR_KEY"            # or key = "sk-..."
    scopes = ["inference"]            # inference | admin (default: inference)
    models = ["smollm2", "qwen*"]     # glob patterns (default: every local model)

`inference`: generation, embeddings, rerank, tokenize, model listings. `admin`: /metrics,
/v1/stats, /props, the Responses store, unloading models. A remote model (served elsewhere
with the user's own upstream key) is reachable only by a key whose patterns name it: the
bare "*" does not. --api-key is one key, `default`, with every scope and every model.
"""

from __future__ import annotations

import fnmatch
import hmac
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from edge_infer.errors import EdgeInferError
from edge_infer.host.model_config import load_toml, one_line
from edge_infer.server.errors import APIError

INFERENCE, ADMIN = "inference", "admin"
SCOPES = (INFERENCE, ADMIN)
Scope = Literal["inference", "admin"]


class KeysFileError(EdgeInferError):
    pass


@dataclass(frozen=True)
class Key:
    name: str
    secret: bytes = field(repr=False)
    scopes: frozenset[str]
    models: tuple[str, ...] | None  # glob patterns; None: every model, remote ones included

    def allows_scope(self, scope: str) -> bool:
        return scope in self.scopes

    def allows_model(self, name: str, remote: bool = False) -> bool:
        """Whether a request with this key may name the model `name`: a remote one only where a
        pattern other than the bare "*" matches it (the user's upstream keys cost money)."""
        if self.models is None:
            return True
        name = name.lower()
        return any(fnmatch.fnmatchcase(name, p.lower()) for p in self.models if not (remote and p == "*"))


class KeyEntry(BaseModel):
    """One [[keys]] table."""
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9._-]+$")  # a log word, a label
    key: str | None = Field(None, min_length=1)
    key_env: str | None = Field(None, min_length=1)
    scopes: list[Scope] = Field([INFERENCE], min_length=1)
    models: list[str] = Field(["*"], min_length=1)

    @model_validator(mode="after")
    def _one_source(self):
        if (self.key is None) == (self.key_env is None):
            raise ValueError("give key or key_env (the name of an environment variable holding it), one of them")
        return self


class KeysFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    keys: list[KeyEntry] = Field(min_length=1)


class Keyring:
    """The keys a server accepts. match() compares a presented key with each in constant time."""

    def __init__(self, keys: list[Key]):
        names = [k.name for k in keys]
        if dup := next((n for n in names if names.count(n) > 1), None):
            raise KeysFileError(f"two keys are named {dup!r}: each key needs its own name")
        if len({k.secret for k in keys}) < len(keys):
            raise KeysFileError("two keys have the same secret: a request could not tell which one it is")
        self.keys = tuple(keys)

    @classmethod
    def load(cls, path: str | Path | None = None, api_key: str | None = None) -> "Keyring | None":
        """The keys of the file at `path` plus `api_key` as the key `default`; None if neither."""
        keys = [Key("default", api_key.encode(), frozenset(SCOPES), None)] if api_key else []
        if path is not None:
            keys += read_keys_file(Path(path).expanduser())
        return cls(keys) if keys else None

    def match(self, presented: str) -> Key | None:
        given, found = presented.encode(), None
        for k in self.keys:  # every key compared: the time taken does not depend on which matched
            if hmac.compare_digest(given, k.secret):
                found = k
        return found


def read_keys_file(path: Path) -> list[Key]:
    if not path.exists():
        raise KeysFileError(f"the API keys file {path} does not exist")
    try:
        entries = KeysFile.model_validate(load_toml(path, "API keys file", KeysFileError)).keys
    except ValidationError as exc:
        raise KeysFileError(f"{path}: {one_line(exc)}") from None
    keys = []
    for i, e in enumerate(entries):
        where = f"{path}: keys.{i} ({e.name})"
        if e.key_env is not None and not os.environ.get(e.key_env, "").strip():
            raise KeysFileError(f"{where}: the environment variable {e.key_env} is not set")
        secret = e.key if e.key is not None else os.environ[e.key_env].strip()
        if not secret or any(c.isspace() for c in secret):
            raise KeysFileError(f"{where}: a key may not be blank or contain spaces")
        models = tuple(dict.fromkeys(e.models))
        keys.append(Key(e.name, secret.encode(), frozenset(e.scopes), models))
    return keys


def presented_key(headers) -> str:
    """The key a request carries: 'Authorization: Bearer KEY', else 'x-api-key: KEY' (Anthropic's)."""
    scheme, _, key = headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not key.strip():
        key = headers.get("x-api-key", "")
    return key.strip()


# ---- a request's key ---------------------------------------------------------------------
REQUEST_KEY = "edge_infer.key"  # where authorize() leaves the matched Key in the ASGI scope


def authorize(keyring: Keyring | None, request, scope: str) -> Key | None:
    """The request's Key (None: the server wants none), or 401 (no key, unknown key) / 403
    (the key lacks `scope`). The refusal names the scope and the key's name, never the key."""
    if keyring is None:
        return None
    presented = presented_key(request.headers)
    if not presented:
        raise APIError(401, "missing API key: send 'Authorization: Bearer KEY' (or 'x-api-key: KEY')",
                       code="missing_api_key", headers={"WWW-Authenticate": "Bearer"})
    key = keyring.match(presented)
    if key is None:
        raise APIError(401, "incorrect API key provided", code="invalid_api_key",
                       headers={"WWW-Authenticate": "Bearer"})
    request.scope[REQUEST_KEY] = key
    if not key.allows_scope(scope):
        raise APIError(403, f"the API key {key.name!r} may not use {request.method} {request.url.path}: that "
                            f"needs the {scope!r} scope (the key has {', '.join(sorted(key.scopes))})",
                       code="insufficient_scope")
    return key


def model_refusal(key: Key, model: str, remote: bool = False) -> APIError:
    why = " (a remote model: a key reaches it only where one of its patterns names it, not by '*')" if remote else ""
    return APIError(403, f"the API key {key.name!r} may not use the model {model!r}{why}", param="model",
                    code="model_not_allowed")


def key_name(request_scope: dict) -> str | None:
    key = request_scope.get(REQUEST_KEY)
    return key.name if key is not None else None
