"""Ollama's wire format: request bodies (validated like schemas.py, so a bad field is a 400
naming it), their translation into our OpenAI-shaped requests, and Ollama's response
objects (api/types.go field names; durations in nanoseconds, times in RFC 3339 UTC).
"""

from __future__ import annotations

import hashlib
import math
import os
import time
from datetime import datetime, timedelta, timezone
from typing import Any, Literal, Union

from pydantic import Field

from edge_infer.server.errors import APIError, bad_request
from edge_infer.server.schemas import Body
from edge_infer.units import human_count

OLLAMA_VERSION = "0.6.0"  # the Ollama API level whose subset the /api routes speak
FOREVER = timedelta(microseconds=(2**63 - 1) // 1000)  # what Ollama reports for keep_alive < 0

# Ollama's documented defaults (Modelfile parameters); a request's `options` override them.
DEFAULTS = {"temperature": 0.8, "top_k": 40, "top_p": 0.9, "min_p": 0.0, "repeat_penalty": 1.1}
_SAMPLING = ("temperature", "top_k", "top_p", "min_p", "repeat_penalty", "presence_penalty",
             "frequency_penalty")


class Options(Body):
    """The runtime options we use; the rest (num_gpu, mirostat, num_thread, ...) are ignored.
    Ranges are checked by our own request schema after translation."""
    num_ctx: int | None = Field(None, ge=1)
    num_predict: int | None = None  # -1 (and 0): no limit; -2: fill the context
    temperature: float | None = None
    top_k: int | None = None
    top_p: float | None = None
    min_p: float | None = None
    seed: int | None = None  # -1: a random seed, as in Ollama
    stop: Union[str, list[str], None] = None
    repeat_penalty: float | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None


Format = Union[Literal["", "json"], dict[str, Any], None]
KeepAlive = Union[str, float, None]


class _Generating(Body):
    model: str = Field(min_length=1)
    format: Format = None
    options: Options | None = None
    stream: bool = True
    keep_alive: KeepAlive = None
    think: Union[bool, str, None] = None  # chat: false leaves a <think> block in content
    logprobs: bool = False


class GenerateBody(_Generating):
    prompt: str | None = None
    system: str | None = None
    template: str | None = None
    suffix: str | None = None
    raw: bool = False
    context: list[int] | None = None  # deprecated in Ollama; ignored here
    images: list[str] | None = None


class Message(Body):
    role: str
    content: str | None = None
    images: list[str] | None = None
    thinking: str | None = None  # an earlier reply's; not shown to the model again
    tool_calls: list[Any] | None = None  # [{"function": {"name", "arguments": {...}}}]: ollama_tools
    tool_name: str | None = None  # a tool message: the function whose result it is


class ChatBody(_Generating):
    messages: list[Message] | None = None
    tools: list[Any] | None = None  # OpenAI's shape, checked by our schema
    tool_choice: Any = None  # an edge-infer extension (Ollama has none): OpenAI's tool_choice


class EmbedBody(Body):
    model: str = Field(min_length=1)
    input: Union[str, list[str]] = Field(default_factory=list)
    truncate: bool = True
    dimensions: int | None = Field(None, ge=1)
    options: Options | None = None
    keep_alive: KeepAlive = None


class EmbeddingsBody(Body):  # the legacy /api/embeddings
    model: str = Field(min_length=1)
    prompt: str = ""
    options: Options | None = None
    keep_alive: KeepAlive = None


class ShowBody(Body):
    model: str | None = None
    name: str | None = None  # older clients send the model as `name`
    verbose: bool = False


def refuse_unsupported(body: _Generating) -> None:
    if body.logprobs:
        raise bad_request("logprobs are not supported on the Ollama routes; use /v1/chat/completions",
                          "logprobs")
    if isinstance(body, GenerateBody):
        if body.template:
            raise bad_request("a custom prompt template is not supported: the model's own chat "
                              "template is used (or send the whole prompt with raw: true)", "template")
        if body.images:
            raise bad_request("images are not supported: the models served here are text-only", "images")
    else:
        for i, m in enumerate(body.messages or ()):
            if m.images:
                raise bad_request("images are not supported: the models served here are text-only",
                                  f"messages[{i}].images")


# ---- translation into our OpenAI-shaped request ----------------------------------------
def openai_fields(body: _Generating, model: str) -> dict:
    """The ChatCompletionRequest / CompletionRequest fields (less prompt or messages)."""
    o = body.options or Options()
    d: dict[str, Any] = {"model": model, "stream": body.stream}
    for name in _SAMPLING:
        value = getattr(o, name)
        if value is None:
            value = DEFAULTS.get(name)
        if value is not None:
            d[name] = value
    if o.seed is not None and o.seed != -1:
        d["seed"] = o.seed
    if o.stop:
        d["stop"] = [o.stop] if isinstance(o.stop, str) else o.stop
    d["max_tokens"] = o.num_predict if o.num_predict and o.num_predict > 0 else None
    if body.format == "json":
        d["response_format"] = {"type": "json_object"}
    elif isinstance(body.format, dict):
        d["response_format"] = {"type": "json_schema", "json_schema": {"name": "response", "schema": body.format}}
    return d


def error_body(exc: APIError) -> dict:
    """Ollama's errors are a message alone: it names the field at fault. The Ollama face's one
    error body (server.faces)."""
    return {"error": exc.message_naming_field()}


def ollama_param(exc: APIError) -> APIError:
    """Our schema's complaint about a translated field, named as the Ollama field it came from."""
    p = exc.param or ""
    head = p.split("[", 1)[0].split(".", 1)[0]
    if head == "max_tokens":
        new = "options.num_predict"
    elif head in _SAMPLING or head in ("seed", "stop"):
        new = "options." + p
    elif head == "response_format":
        new = "format"
    else:
        return exc
    exc.message = exc.message.replace(f"'{p}'", f"'{new}'")
    exc.args = (exc.message,)
    exc.param = new
    return exc


# ---- responses ---------------------------------------------------------------------------
def timestamp(t: float | None = None) -> str:
    """RFC 3339 in UTC with microseconds, as Ollama writes created_at."""
    dt = datetime.now(timezone.utc) if t is None else datetime.fromtimestamp(t, timezone.utc)
    return dt.isoformat(timespec="microseconds").replace("+00:00", "Z")


def expires_at(seconds: float | None) -> str:
    now = datetime.now(timezone.utc)
    at = now + FOREVER if seconds is None or math.isinf(seconds) else now + timedelta(seconds=seconds)
    return at.isoformat(timespec="microseconds").replace("+00:00", "Z")


def ns(seconds: float) -> int:
    return max(0, int(seconds * 1e9))


def timings(stats, started: float, load_seconds: float) -> dict:
    """The final object's counters. `started`: perf_counter when the request arrived."""
    if stats is None:
        return {"total_duration": ns(time.perf_counter() - started), "load_duration": ns(load_seconds)}
    first = stats.first_token_at or stats.finished_at
    return {"total_duration": ns(stats.finished_at - started), "load_duration": ns(load_seconds),
            "prompt_eval_count": stats.prompt_tokens,
            "prompt_eval_duration": ns(first - stats.started_at) if stats.started_at else 0,
            "eval_count": stats.generated_tokens, "eval_duration": ns(stats.finished_at - first)}


class GenerateWire:
    def __init__(self, model: str):
        self.model = model

    def content(self, text: str) -> dict:
        return {"response": text}

    def piece(self, text: str) -> dict:
        return {"model": self.model, "created_at": timestamp(), **self.content(text), "done": False}

    def done(self, text: str, reason: str, counters: dict | None = None) -> dict:
        return {"model": self.model, "created_at": timestamp(), **self.content(text), "done": True,
                "done_reason": reason, **(counters or {})}


class ChatWire(GenerateWire):
    def content(self, text: str) -> dict:
        return {"message": {"role": "assistant", "content": text}}


def digest(path: str) -> str:
    """Names this version of the file (path, size, mtime): cheap, unlike hashing gigabytes."""
    try:
        st = os.stat(path)
        key = f"{path}\0{st.st_size}\0{st.st_mtime_ns}"
    except OSError:
        key = path
    return hashlib.sha256(key.encode("utf-8", "backslashreplace")).hexdigest()


def details(info) -> dict:
    if info is None:
        return {"parent_model": "", "format": "gguf", "family": "", "families": None,
                "parameter_size": "", "quantization_level": ""}
    return {"parent_model": "", "format": "gguf", "family": info.architecture, "families": [info.architecture],
            "parameter_size": human_count(info.parameter_count), "quantization_level": info.quantization}


def modified_at(path: str) -> str:
    try:
        return timestamp(os.stat(path).st_mtime)
    except OSError:
        return timestamp()


def model_entry(name: str, path: str, size: int, info) -> dict:
    """One model of /api/tags (and the base of one of /api/ps)."""
    return {"name": name, "model": name, "modified_at": modified_at(path), "size": size,
            "digest": digest(path), "details": details(info)}


def model_info(info, verbose: bool = False) -> dict:
    """/api/show's model_info: the header's metadata. Arrays (languages, tokens) come
    empty unless verbose, as in Ollama; the chat template is in `template` instead."""
    out: dict[str, Any] = {}
    for key, value in info.metadata.items():
        if key.startswith("_") or key == "tokenizer.chat_template":
            continue
        if isinstance(value, (tuple, list)):
            out[key] = [v for v in value if _plain(v)] if verbose else []
        elif _plain(value):
            out[key] = value
    out["general.parameter_count"] = info.parameter_count
    return dict(sorted(out.items()))


def _plain(v) -> bool:
    return isinstance(v, (str, bool, int)) or (isinstance(v, float) and math.isfinite(v))


def show(info, path: str, verbose: bool = False) -> dict:
    caps = ["completion"]
    if f"{info.architecture}.pooling_type" in info.metadata:
        caps.append("embedding")
    return {"license": str(info.metadata.get("general.license", "")),
            "modelfile": f"# Modelfile generated by edge-infer\nFROM {path}\n",
            "parameters": "\n".join(f"{k:<30} {v}" for k, v in DEFAULTS.items()),
            "template": info.chat_template or "", "details": details(info),
            "model_info": model_info(info, verbose), "capabilities": caps, "modified_at": modified_at(path)}
