"""OpenAI function calling, the request side: `tools`, `tool_choice`, assistant
`tool_calls` and `tool` messages. Checked here so nothing a client writes reaches the chat
template or the grammar converter unchecked (schemas.ChatCompletionRequest calls in).
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from edge_infer.server.errors import bad_request

NAME_PATTERN = r"^[a-zA-Z0-9_-]{1,64}$"  # OpenAI's rule for function names
CHOICES = ("auto", "none", "required")
MAX_TOOLS = 128  # OpenAI's limit


class Body(BaseModel):  # as schemas.Body (that module imports this one)
    model_config = ConfigDict(extra="ignore", allow_inf_nan=False)


class FunctionDef(Body):
    name: str = Field(pattern=NAME_PATTERN)
    description: str | None = None
    parameters: dict[str, Any] | None = None  # a JSON Schema; absent: no arguments
    strict: bool | None = None  # accepted; a forced call is always grammar-constrained

    @property
    def schema(self) -> dict[str, Any]:
        return self.parameters if self.parameters is not None else {"type": "object", "properties": {}}


class Tool(Body):
    type: Literal["function"]
    function: FunctionDef

    def as_dict(self) -> dict[str, Any]:
        """The tool as OpenAI sends it (what chat templates read as `tools`)."""
        fn: dict[str, Any] = {"name": self.function.name}
        if self.function.description is not None:
            fn["description"] = self.function.description
        fn["parameters"] = self.function.schema
        return {"type": "function", "function": fn}


class FunctionCall(Body):
    name: str = Field(pattern=NAME_PATTERN)
    # JSON text as OpenAI sends it back, or the object Anthropic's and Ollama's faces hand
    # over; an object once check_tool_messages has read it (the only place it is parsed).
    arguments: dict[str, Any] | str


class ToolCall(Body):
    id: str = Field(min_length=1, max_length=256)
    type: Literal["function"] = "function"
    function: FunctionCall


def check_tools(tools: list[Tool] | None) -> None:
    if tools is None:
        return
    if len(tools) > MAX_TOOLS:
        raise bad_request(f"at most {MAX_TOOLS} tools; got {len(tools)}", "tools")
    seen: dict[str, int] = {}
    for i, tool in enumerate(tools):
        name = tool.function.name
        if name in seen:
            raise bad_request(f"tools[{seen[name]}] and tools[{i}] are both named {name!r}; names must be unique",
                              f"tools[{i}].function.name")
        seen[name] = i
        if tool.function.parameters is not None:
            check_json_schema(tool.function.parameters, f"tools[{i}].function.parameters")


def check_json_schema(schema: dict, param: str) -> None:
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        where = "/".join(str(p) for p in exc.path)
        raise bad_request(f"not a valid JSON Schema{f' at {where}' if where else ''}: {exc.message[:200]}",
                          param) from None
    except RecursionError:
        raise bad_request("the JSON Schema is nested too deeply", param) from None


def check_tool_choice(choice: Any, tools: list[Tool] | None) -> str | None:
    """'auto' | 'none' | 'required' | a function name (a named choice), or a 400."""
    if choice is None:
        return None
    if isinstance(choice, str):
        if choice not in CHOICES:
            raise bad_request(f"tool_choice {choice[:40]!r} is not supported; give 'auto', 'none', 'required' "
                              "or {\"type\": \"function\", \"function\": {\"name\": ...}}", "tool_choice")
        if choice == "required" and not tools:
            raise bad_request("tool_choice 'required' needs tools", "tool_choice")
        return choice
    if not isinstance(choice, dict) or choice.get("type") != "function":
        kind = choice.get("type") if isinstance(choice, dict) else type(choice).__name__
        raise bad_request(f"tool_choice of type {str(kind)[:40]!r} is not supported; give 'auto', 'none', "
                          "'required' or {\"type\": \"function\", \"function\": {\"name\": ...}}", "tool_choice")
    fn = choice.get("function")
    name = fn.get("name") if isinstance(fn, dict) else None
    if not isinstance(name, str) or not name:
        raise bad_request("tool_choice names no function: give {\"type\": \"function\", \"function\": "
                          "{\"name\": ...}}", "tool_choice.function.name")
    if not tools:
        raise bad_request(f"tool_choice names the function {name[:64]!r} but no tools are given", "tool_choice")
    if name not in {t.function.name for t in tools}:
        raise bad_request(f"tool_choice names the function {name[:64]!r}, which is not in tools",
                          "tool_choice.function.name")
    return name


def check_tool_messages(messages: list) -> None:
    """Assistant tool_calls carry JSON arguments, read here once into the object every later
    step takes; a tool message answers an earlier call."""
    ids: set[str] = set()
    for i, m in enumerate(messages):
        if m.tool_calls is not None and m.role != "assistant":
            raise bad_request(f"only assistant messages carry tool_calls (this one is {m.role!r})",
                              f"messages[{i}].tool_calls")
        for j, call in enumerate(m.tool_calls or ()):
            param = f"messages[{i}].tool_calls[{j}].function.arguments"
            args = call.function.arguments
            if isinstance(args, str):
                try:
                    args = json.loads(args) if args.strip() else {}
                except (ValueError, RecursionError):
                    raise bad_request("the arguments of a tool call must be JSON text", param) from None
            if not isinstance(args, dict):
                raise bad_request("the arguments of a tool call must be a JSON object", param)
            call.function.arguments = args
            ids.add(call.id)
        if m.role == "tool":
            if not m.tool_call_id:
                raise bad_request("a tool message needs the tool_call_id of the call it answers",
                                  f"messages[{i}].tool_call_id")
            if m.tool_call_id not in ids:
                raise bad_request(f"tool_call_id {m.tool_call_id[:64]!r} matches no tool call of an earlier "
                                  "assistant message", f"messages[{i}].tool_call_id")
