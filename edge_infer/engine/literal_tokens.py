"""The vocabulary side of "client text stays text" (chat/literal_text.py has the template side).

llama.cpp's tokenizer, asked to parse special tokens, turns every occurrence of a control
token's text into that token; asked not to, it leaves control (and unknown) tokens as
text. User-defined tokens (Gemma's whitespace runs and HTML tags, Qwen's "<tool_call>")
are tokens either way, as in Hugging Face tokenizers: they are not what this guards.
"""

from __future__ import annotations

import weakref

from edge_infer.chat.literal_text import ControlTexts, Part
from edge_infer.engine.native.llama import LlamaModel

_cache: "weakref.WeakKeyDictionary[LlamaModel, ControlTexts]" = weakref.WeakKeyDictionary()


def control_texts(model: LlamaModel) -> ControlTexts:
    """The texts of the model's control and unknown tokens (read once per model)."""
    found = _cache.get(model)
    if found is None:
        found = _cache[model] = ControlTexts(model.special_only_texts())
    return found


def tokenize_parts(model: LlamaModel, parts: list[Part], add_special: bool) -> list[int]:
    """Template parts with special parsing, literal parts as text; with add_special, the
    tokens the model adds around a text (BOS, and EOS where it adds one) around them all,
    as tokenizing the whole text puts them."""
    tokens: list[int] = []
    for part in parts:
        tokens += model.tokenize(part.text, add_special=False, parse_special=not part.literal)
    if not add_special:
        return tokens
    around = model.tokenize("", add_special=True)
    head = around[:1] if model.add_bos else []
    return head + tokens + around[len(head):]
