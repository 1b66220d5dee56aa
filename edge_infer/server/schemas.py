"""Request bodies. Validation here produces the 400 messages clients see, with `param`
pointing at the offending field. Unknown fields are ignored (clients send many we don't use).

Responses are built as plain dicts in responses.py: one per streamed token, so cheap.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from edge_infer.chat import TEMPLATE_RESERVED as RESERVED_TEMPLATE_VARS
from edge_infer.server.errors import APIError, bad_request
from edge_infer.server.tool_schemas import Tool, ToolCall, check_tool_choice, check_tool_messages, check_tools


# Validators raise APIError (not a ValueError), which pydantic lets through untouched:
# that is how a cross-field check names its own `param`.
class Body(BaseModel):
    # NaN and Infinity parse as JSON numbers (json.loads accepts them): refuse them here,
    # before a NaN temperature or penalty reaches llama.cpp's samplers.
    model_config = ConfigDict(extra="ignore", allow_inf_nan=False)


class TextPart(Body):
    type: Literal["text"]
    text: str


class ChatMessage(Body):
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: Union[str, list[TextPart], None] = None
    name: str | None = None
    tool_calls: list[ToolCall] | None = None  # assistant: calls it made (content may be null)
    tool_call_id: str | None = None           # tool: the call this message answers


class JSONSchemaFormat(Body):
    name: str = "response"
    schema_: dict[str, Any] = Field(default_factory=dict, alias="schema")
    strict: bool | None = None


class ResponseFormat(Body):
    type: Literal["text", "json_object", "json_schema"] = "text"
    json_schema: JSONSchemaFormat | None = None

    @model_validator(mode="after")
    def _schema_given(self):
        if self.type == "json_schema" and self.json_schema is None:
            raise bad_request("type 'json_schema' needs a json_schema object with a schema",
                              "response_format.json_schema")
        return self


class StreamOptions(Body):
    include_usage: bool = False


StopString = Annotated[str, Field(max_length=256)]   # each is matched against the text per token
Stop = Union[StopString, Annotated[list[StopString], Field(max_length=4)], None]


class _Sampling(Body):
    """Fields shared by chat and text completions (OpenAI's names and ranges)."""
    model: str | None = None
    n: int = Field(1, ge=1, le=16)
    stop: Stop = None
    temperature: float = Field(1.0, ge=0.0, le=2.0)
    top_p: float = Field(1.0, ge=0.0, le=1.0)
    # Any int64 or uint64; -1: a random seed (llama-server's); the engine reduces the rest
    # modulo 2**32, llama.cpp's uint32 (engine.sampling.dist_seed).
    seed: int | None = Field(None, ge=-(2**63), lt=2**64)
    presence_penalty: float = Field(0.0, ge=-2.0, le=2.0)
    frequency_penalty: float = Field(0.0, ge=-2.0, le=2.0)
    stream: bool = False
    stream_options: StreamOptions | None = None
    # llama.cpp extensions (its own server accepts the same names)
    top_k: int = Field(40, ge=0, le=2**31 - 1)  # an int32 in llama.cpp; >= the vocab means off
    min_p: float = Field(0.05, ge=0.0, le=1.0)
    repeat_penalty: float = Field(1.0, ge=1e-6, le=1e6)  # logits stay finite (engine.sampling.check_params)
    ignore_eos: bool = False
    grammar: str | None = None
    # n-gram speculation: true (the server's draft length, else 8), false, or the most tokens
    # drafted per step (0-32). Unset: the server's --draft-max. The output is the same.
    speculative: bool | int | None = None
    # OpenAI's shape: {"token id": bias in [-100, 100]}; ids are checked against the vocab
    # by the engine.
    logit_bias: dict[str, float] | None = Field(None, max_length=1024)
    # Ollama's keep_alive ("5m", seconds, 0 = unload after, -1 = keep): how long the model
    # stays loaded after this request (parsed by server.leases).
    keep_alive: str | float | None = None

    @model_validator(mode="after")
    def _check_logit_bias(self):
        for key, bias in (self.logit_bias or {}).items():
            if not (key.isascii() and key.isdigit() and len(key) <= 10):
                raise bad_request(f"logit_bias keys are token ids as strings; got {key[:40]!r}", "logit_bias")
            if not -100 <= bias <= 100:
                raise bad_request(f"logit_bias[{key!r}] is {bias}; biases go from -100 to 100", "logit_bias")
        return self

    @model_validator(mode="after")
    def _check_speculative(self):
        v = self.speculative
        if not isinstance(v, bool) and v is not None and not 0 <= v <= 32:
            raise bad_request(f"speculative is {v}; give true, false or 0-32 drafted tokens", "speculative")
        return self

    def draft_max(self, server_default: int) -> int | None:
        """Drafted tokens per step this request asks for (None: the server's default)."""
        v = self.speculative
        if v is None or v is False:
            return None if v is None else 0
        if v is True:
            return server_default or 8
        return int(v)

    @property
    def bias_pairs(self) -> tuple[tuple[int, float], ...]:
        return tuple((int(k), float(v)) for k, v in (self.logit_bias or {}).items())

    @property
    def stops(self) -> tuple[str, ...]:
        if self.stop is None:
            return ()
        return (self.stop,) if isinstance(self.stop, str) else tuple(s for s in self.stop if s)

    @property
    def include_usage(self) -> bool:
        return bool(self.stream_options and self.stream_options.include_usage)


# reasoning_effort as a reasoning budget: what a CPU can afford to think at each level.
EFFORT_BUDGETS = {"none": 0, "minimal": 0, "low": 256, "medium": 1024, "high": 4096, "xhigh": -1}


class ChatCompletionRequest(_Sampling):
    messages: list[ChatMessage] = Field(min_length=1)
    max_tokens: int | None = Field(None, ge=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    logprobs: bool = False
    top_logprobs: int | None = Field(None, ge=0, le=20)
    response_format: ResponseFormat | None = None
    tools: list[Tool] | None = None
    tool_choice: Any = None  # "auto" | "none" | "required" | {"type": "function", ...}: tool_schemas
    parallel_tool_calls: bool = True
    # The deprecated forms: dropping them silently would leave an agent waiting for calls.
    functions: list[Any] | None = None
    function_call: Any = None
    # A leading <think> block: "auto" (or llama-server's "deepseek") splits it into
    # reasoning_content, "none" leaves it in content; include_reasoning false drops it.
    reasoning_format: Literal["auto", "deepseek", "none"] = "auto"
    include_reasoning: bool = True
    # OpenAI's reasoning_effort: "none" / "minimal" turn a model's thinking off where its
    # template has a switch (enable_thinking, as Qwen 3's); a template that reads
    # reasoning_effort itself (gpt-oss) gets it as it is.
    reasoning_effort: Literal["none", "minimal", "low", "medium", "high", "xhigh"] | None = None
    # Reasoning tokens before the engine closes the <think> block and the model answers (-1: no
    # limit). Unset: from reasoning_effort (EFFORT_BUDGETS), else the server's --reasoning-budget.
    reasoning_budget: int | None = Field(None, ge=-1)
    # Extra chat-template variables (llama-server's and vLLM's name), e.g. {"enable_thinking": false}.
    chat_template_kwargs: dict[str, Any] | None = Field(None, max_length=32)
    _tool_choice: str | None = None  # tool_choice once checked: see forced_tool

    @model_validator(mode="after")
    def _check(self):
        if self.top_logprobs and not self.logprobs:
            raise bad_request("top_logprobs needs logprobs set to true", "top_logprobs")
        for old in ("functions", "function_call"):
            if getattr(self, old) is not None:
                raise bad_request(f"{old} (deprecated) is not supported; use tools and tool_choice", old)
        for key in self.chat_template_kwargs or {}:
            if not key.isidentifier() or key in RESERVED_TEMPLATE_VARS:
                raise bad_request(f"chat_template_kwargs cannot set {key[:40]!r}: the server sets "
                                  f"{', '.join(sorted(RESERVED_TEMPLATE_VARS))} itself, and keys are "
                                  "identifiers", "chat_template_kwargs")
        check_tools(self.tools)
        self._tool_choice = check_tool_choice(self.tool_choice, self.tools)
        check_tool_messages(self.messages)
        return self

    @property
    def template_vars(self) -> dict | None:
        """Variables for the chat template: chat_template_kwargs, and what reasoning_effort
        means for it (kwargs given explicitly win)."""
        out = {}
        if self.reasoning_effort is not None:
            out = {"reasoning_effort": self.reasoning_effort,
                   "enable_thinking": self.reasoning_effort not in ("none", "minimal")}
        out.update(self.chat_template_kwargs or {})
        return out or None

    @property
    def reasoning_budget_tokens(self) -> int | None:
        if self.reasoning_budget is not None or self.reasoning_effort is None:
            return self.reasoning_budget
        return EFFORT_BUDGETS[self.reasoning_effort]

    @property
    def forced_tool(self) -> str | None:
        """'required', a function name (tool_choice names one), or None (auto, none, no tools)."""
        choice = self._tool_choice
        return None if choice in (None, "auto", "none") else choice

    @property
    def tools_for_prompt(self) -> list[dict] | None:
        """The tools as the chat template reads them; none for tool_choice 'none'."""
        if not self.tools or self._tool_choice == "none":
            return None
        return [t.as_dict() for t in self.tools]

    @property
    def limit(self) -> int | None:
        return self.max_completion_tokens or self.max_tokens


Prompt = Union[str, list[str], Annotated[list[int], Field(min_length=1)], list[list[int]]]


class CompletionRequest(_Sampling):
    prompt: Prompt
    max_tokens: int | None = Field(16, ge=1)  # OpenAI's default for this endpoint
    logprobs: int | None = Field(None, ge=0, le=20)
    echo: bool = False
    best_of: int | None = Field(None, ge=1)
    suffix: str | None = None

    @model_validator(mode="after")
    def _check(self):
        if self.best_of is not None and self.best_of != self.n:
            raise bad_request("best_of other than n is not supported", "best_of")
        if self.suffix is not None and not isinstance(self.prompt, str):
            raise bad_request("with suffix (fill in the middle), prompt is the text before it: one string",
                              "prompt")
        if self.suffix is not None and self.echo:
            raise bad_request("echo repeats a prompt; with suffix the prompt is built around the gap", "echo")
        if isinstance(self.prompt, list) and not self.prompt:
            raise bad_request("prompt must not be empty", "prompt")
        return self

    @property
    def limit(self) -> int | None:
        return self.max_tokens

    def prompts(self) -> list[str | list[int]]:
        """One entry per prompt: text, or token ids."""
        p = self.prompt
        if isinstance(p, str):
            return [p]
        if all(isinstance(x, int) for x in p):
            return [list(p)]
        return list(p)


def _param(loc: tuple) -> str | None:
    """('messages', 0, 'role') -> 'messages[0].role' (dropping pydantic's union branch names)."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part in ("str", "list[str]", "list[int]", "constrained-str", "list[constrained-str]", "list[list[int]]", "list[TextPart]", "none") \
                or "[" in str(part) or part.startswith("function-"):
            continue
        else:
            out += f".{part}" if out else part
    return out or None


def parse(model: type[BaseModel], raw: bytes):
    """Raw body -> validated request, or an APIError naming the field at fault."""
    try:
        data = json.loads(raw)
    except ValueError as exc:  # JSONDecodeError, bad UTF-8, an integer of 5000 digits
        raise bad_request(f"the request body is not valid JSON: {str(exc)[:200]}") from None
    except RecursionError:  # [[[[...]]]] thousands deep: the decoder's recursion runs out
        raise bad_request("the request body is nested too deeply") from None
    if not isinstance(data, dict):
        raise bad_request("the request body must be a JSON object")
    return validate(model, data)


def validate(model: type[BaseModel], data: dict):
    """A request already read as a dict (another face's body in ours) -> validated request,
    or an APIError naming the field at fault."""
    try:
        return model.model_validate(data)
    except RecursionError:
        raise bad_request("the request body is nested too deeply") from None
    except ValidationError as exc:
        # With unions pydantic reports every branch; the most telling is a non-type error
        # (e.g. "too many items"), else the deepest one (the element that is wrong).
        errors = exc.errors(include_url=False)
        err = min(errors, key=lambda e: (e["type"].endswith("_type") or e["type"].endswith("_parsing"),
                                         -len(e["loc"])))
        param = _param(err["loc"]) if err["loc"] else None
        msg = err["msg"].removeprefix("Value error, ")
        where = f"'{param}': " if param else ""
        raise APIError(400, f"invalid {where}{msg}" if param else msg, param=param,
                       code="invalid_value") from None
