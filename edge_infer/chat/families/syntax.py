"""Each family's call syntax as literal parts around the name and the arguments: what the
call grammars write (chat/gbnf/tools.py) and, for the JSON ones, what the
constrained parser streams back (constrained.py)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CallWrapper:
    """A family's call syntax: list_open (call_open NAME name_close ARGS call_close)
    (separator ...)* list_close. Every part is literal text."""
    call_open: str
    name_close: str
    call_close: str
    separator: str = "\n"
    list_open: str = ""
    list_close: str = ""
    trigger: str = ""  # text that starts a call (a lazy grammar's trigger)
    syntax: str = "json"  # how the arguments are written: json | function_gemma | python


HERMES = CallWrapper(call_open='<tool_call>\n{"name": "', name_close='", "arguments": ',
                     call_close="}\n</tool_call>", trigger="<tool_call>")
# Mistral: [TOOL_CALLS][{"name": ..., "arguments": {...}}, ...]
MISTRAL = CallWrapper(call_open='{"name": "', name_close='", "arguments": ', call_close="}",
                      separator=", ", list_open="[TOOL_CALLS][", list_close="]", trigger="[TOOL_CALLS]")
# Llama 3.x JSON calls: {"name": ..., "parameters": {...}}; the call's own opening is its trigger.
LLAMA3 = CallWrapper(call_open='{"name": "', name_close='", "parameters": ', call_close="}",
                     separator="; ", trigger='{"name": "')
# FunctionGemma: <start_function_call>call:NAME{key:<escape>text<escape>,n:1}<end_function_call>
FUNCTION_GEMMA = CallWrapper(call_open="<start_function_call>call:", name_close="",
                             call_close="<end_function_call>", separator="",
                             trigger="<start_function_call>", syntax="function_gemma")
# Gemma's tool_code: a fenced Python call with keyword arguments.
GEMMA_TOOL_CODE = CallWrapper(call_open="```tool_code\nprint(", name_close="(", call_close="))\n```",
                              separator="\n", trigger="```tool_code", syntax="python")
