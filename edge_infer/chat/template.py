"""Chat messages -> prompt text, with the model's own Jinja chat template from its GGUF.

Rendered in Jinja's immutable sandbox as Hugging Face transformers does: a template is
data from a model file, and one that reaches for Python's internals (the CVE-2024-34359
payload, `''.__class__.__mro__`...) is refused with a clear error, nothing run. A model
without a template (base models often ship none) gets its family's known format, else ChatML.
"""

from __future__ import annotations

import json
from datetime import datetime

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment, SecurityError

from edge_infer.chat.literal_text import text_of
from edge_infer.chat.tool_prompt import hermes_fallback, hf_messages, template_supports_tools, template_variables
from edge_infer.chat.reasoning import opens_in_reasoning
from edge_infer.errors import EdgeInferError

CHATML = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{{ message['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
GEMMA = (
    "{{ bos_token }}{% if messages[0]['role'] == 'system' %}"
    "{% set first = messages[0]['content'] + '\\n\\n' %}{% set turns = messages[1:] %}"
    "{% else %}{% set first = '' %}{% set turns = messages %}{% endif %}"
    "{% for m in turns %}<start_of_turn>{{ 'model' if m['role'] == 'assistant' else 'user' }}\n"
    "{{ (first if loop.first else '') + m['content'] | trim }}<end_of_turn>\n{% endfor %}"
    "{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}"
)
FALLBACKS = {"gemma": GEMMA, "gemma2": GEMMA, "gemma3": GEMMA}
ROLES = {"system", "user", "assistant", "developer", "tool"}
# What render() itself passes: extra variables (chat_template_kwargs) may not replace them.
RESERVED = frozenset({"messages", "tools", "add_generation_prompt", "bos_token", "eos_token",
                      "raise_exception", "strftime_now"})


class ChatTemplateError(EdgeInferError):
    pass


def _raise_exception(message: str):
    raise ChatTemplateError(f"the model's chat template refused the messages: {message}")


def _strftime_now(fmt: str) -> str:
    return datetime.now().strftime(fmt)


def _tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    # As transformers renders templates: keys in their order, no HTML escaping (Jinja's own
    # tojson sorts keys and writes < as \u003c); tools and tool calls are printed with it.
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


class ChatTemplate:
    def __init__(self, source: str | None, bos_token: str = "", eos_token: str = "",
                 architecture: str = "", name: str = "the model's chat template"):
        """name: what errors call it (which model's, or which file)."""
        self.source = source or FALLBACKS.get(architecture, CHATML)
        self.name = name
        self.bos_token = bos_token
        self.eos_token = eos_token
        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                            extensions=["jinja2.ext.loopcontrols"])
        env.globals.update(raise_exception=_raise_exception, strftime_now=_strftime_now)
        env.filters["tojson"] = _tojson
        try:
            self._template = env.from_string(self.source)
        except jinja2.TemplateError as exc:
            raise ChatTemplateError(f"the model's chat template does not parse: {exc}") from exc
        self.supports_tools = template_supports_tools(self.source)
        self.variables = template_variables(self.source)  # what it reads (enable_thinking, ...)
        self._opens: dict[str, bool] = {}

    def opens_reasoning(self, variables: dict | None = None) -> bool:
        """Whether the generation prompt ends inside an open <think> block (DeepSeek-R1 style
        templates write it there), so the reply starts in its reasoning."""
        key = json.dumps(variables or {}, sort_keys=True, default=str)
        if key not in self._opens:
            if len(self._opens) >= 64:  # clients choose the variables: keep the cache small
                self._opens.clear()
            try:
                probe = self.render([{"role": "user", "content": "Hi"}], variables=variables)
            except ChatTemplateError:
                probe = ""
            self._opens[key] = opens_in_reasoning(probe)
        return self._opens[key]

    def render(self, messages: list[dict], add_generation_prompt: bool = True,
               tools: list[dict] | None = None, variables: dict | None = None) -> str:
        """`tools`: OpenAI tool dicts. Messages may carry tool_calls / tool_call_id (tool_prompt).
        `variables`: extra template variables (chat_template_kwargs: enable_thinking, ...)."""
        clean = []
        for i, m in enumerate(messages):
            role, content = m.get("role"), m.get("content")
            if role not in ROLES:
                raise ChatTemplateError(f"message {i}: unknown role {role!r}")
            if isinstance(content, list):  # OpenAI content parts: keep the text parts
                content = text_of(content)
            if content is None and (m.get("tool_calls") or role == "tool"):
                content = ""
            if not isinstance(content, str):
                raise ChatTemplateError(f"message {i}: content must be text")
            msg = {"role": "system" if role == "developer" else role, "content": content}
            if m.get("tool_calls"):
                msg["tool_calls"] = m["tool_calls"]
            if role == "tool":
                msg.update({k: m[k] for k in ("tool_call_id", "name") if m.get(k)})
            clean.append(msg)
        extra = {k: v for k, v in (variables or {}).items() if k not in RESERVED}
        if self.supports_tools:
            clean = hf_messages(clean)
            if tools:
                extra["tools"] = tools
        elif tools or any("tool_calls" in m or m["role"] == "tool" for m in clean):
            # No tool support in this template: tools and tool turns in the Hermes style
            # (a <tools> system prompt, <tool_call> / <tool_response> text), so any model can be asked.
            clean = hermes_fallback(clean, tools)
        try:
            return self._template.render(messages=clean, add_generation_prompt=add_generation_prompt,
                                         bos_token=self.bos_token, eos_token=self.eos_token, **extra)
        except ChatTemplateError:
            raise
        except SecurityError as exc:  # before TemplateError: it is one
            raise ChatTemplateError(f"{self.name} tried to leave the Jinja sandbox and was stopped, "
                                    f"nothing was run: {exc}") from None
        except (jinja2.TemplateError, TypeError, ValueError, LookupError, AttributeError, ArithmeticError,
                RecursionError) as exc:  # e.g. a chat_template_kwargs value of a type it did not expect
            raise ChatTemplateError(f"the model's chat template failed: {exc}") from exc
