"""Chat dialects as pure text, below the engine: chat templates, tool prompts, GBNF
grammars (checked before llama.cpp sees them), the tool-call families, and the reader
that turns a reply's tokens into typed reply events. Nothing here loads llama.cpp."""

from edge_infer.chat import families  # noqa: F401  tool-call families: families.family_for(...)
from edge_infer.chat.gbnf.check import GrammarError, checked_gbnf, validate_gbnf
from edge_infer.chat.gbnf.json_schema import SchemaError, json_schema_grammar
from edge_infer.chat.gbnf.tools import (HERMES, CallWrapper, ToolGrammarError, tool_call_continuation,
                                        tool_call_grammar)
from edge_infer.chat.template import RESERVED as TEMPLATE_RESERVED
from edge_infer.chat.tool_prompt import template_supports_tools

WRAPPERS = families.call_syntaxes()  # family name -> the call syntax its grammars write

__all__ = ["families", "GrammarError", "checked_gbnf", "validate_gbnf", "SchemaError", "json_schema_grammar", "HERMES",
           "WRAPPERS", "CallWrapper",
           "ToolGrammarError", "tool_call_continuation", "tool_call_grammar", "TEMPLATE_RESERVED",
           "template_supports_tools"]
