"""Tools and tool-call history in a chat prompt (the request side of function calling).

Messages come in OpenAI's shape (assistant `tool_calls` whose `arguments` is JSON text,
`tool` messages with `tool_call_id`) or already in Hugging Face's (arguments as a dict: the
server reads them once at its door). `read_arguments` is the one reader of JSON text here.
A chat template that reads `tools` gets them as Hugging Face transformers passes them:
`tools` = the OpenAI tool dicts, tool calls with `arguments` as a dict. A template without
tool support gets the Hermes / Qwen 2.5 convention written into plain messages instead
(`hermes_fallback`), so any model can still be asked to call tools: the tools in a
`<tools>` block of the system prompt, calls as `<tool_call>` JSON, results as
`<tool_response>` in a user turn.
"""

from __future__ import annotations

import json
import re

import jinja2
from jinja2 import meta


def template_variables(template: str) -> frozenset[str]:
    """The variables a chat template reads from its caller (tools, enable_thinking, ...)."""
    try:
        return frozenset(meta.find_undeclared_variables(jinja2.Environment(
            extensions=["jinja2.ext.loopcontrols"]).parse(template)))
    except jinja2.TemplateError:  # ChatTemplate reports the parse error itself
        return frozenset(re.findall(r"\b[A-Za-z_]\w*\b", template))


def template_supports_tools(template: str) -> bool:
    """Whether a chat template reads the `tools` variable (then it renders tools itself)."""
    return "tools" in template_variables(template)


def read_arguments(args):
    """A tool call's arguments as the object templates print (JSON text is read; a dict, as
    the server sends, is taken as it is)."""
    if isinstance(args, str):
        try:
            return json.loads(args) if args.strip() else {}
        except ValueError:
            return args  # the server checks this; an engine caller gets its text back
    return args


def hf_messages(messages: list[dict]) -> list[dict]:
    """Tool calls with dict arguments (as templates expect) and tool messages with the
    called function's `name` (Llama 3 and Mistral templates print it)."""
    names: dict[str, str] = {}
    out = []
    for m in messages:
        if not isinstance(m, dict):  # the template says what is wrong with it
            out.append(m)
            continue
        m = dict(m)
        if m.get("tool_calls"):
            calls = []
            for c in m["tool_calls"]:
                fn = c.get("function") or {}
                calls.append({"id": c.get("id"), "type": "function",
                              "function": {"name": fn.get("name"), "arguments": read_arguments(fn.get("arguments"))}})
                if c.get("id"):
                    names[c["id"]] = fn.get("name")
            m["tool_calls"] = calls
        if m.get("role") == "tool" and not m.get("name") and m.get("tool_call_id") in names:
            m["name"] = names[m["tool_call_id"]]
        out.append(m)
    return out


HERMES_TOOLS = (
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n{tools}\n</tools>\n\n"
    "For each function call, return a json object with function name and arguments within "
    "<tool_call></tool_call> XML tags:\n<tool_call>\n{{\"name\": <function-name>, \"arguments\": "
    "<args-json-object>}}\n</tool_call>"
)


def hermes_call(call: dict) -> str:
    fn = call["function"]
    return "<tool_call>\n" + json.dumps({"name": fn["name"], "arguments": fn["arguments"]}) + "\n</tool_call>"


def hermes_fallback(messages: list[dict], tools: list[dict] | None) -> list[dict]:
    """Tools and tool turns as plain role + content messages, for a template that has no
    tool support: the tools described in the system prompt (added, or put before the
    first system message), calls as <tool_call> text, consecutive tool results as one
    user turn of <tool_response> blocks."""
    out: list[dict] = []
    for m in hf_messages(messages):
        role, content = m["role"], m.get("content") or ""
        if role == "assistant" and m.get("tool_calls"):
            content = "\n".join(([content] if content else []) + [hermes_call(c) for c in m["tool_calls"]])
        if role == "tool":
            block = f"<tool_response>\n{content}\n</tool_response>"
            if out and out[-1].get("_tool_results"):
                out[-1]["content"] += "\n" + block
                continue
            out.append({"role": "user", "content": block, "_tool_results": True})
            continue
        out.append({"role": role, "content": content})
    if tools:
        described = HERMES_TOOLS.format(tools="\n".join(json.dumps(t) for t in tools))
        if out and out[0]["role"] == "system":
            out[0] = {"role": "system", "content": out[0]["content"] + "\n\n" + described}
        else:
            out.insert(0, {"role": "system", "content": described})
    for m in out:
        m.pop("_tool_results", None)
    return out
