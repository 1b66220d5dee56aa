"""The vocabulary side of "client text stays text" (chat/literal_text.py has the template side).

llama.cpp's tokenizer, asked to parse special tokens, turns every occurrence of a control
token's text into that token; asked not to, it leaves control (and unknown) tokens as
text. User-defined tokens (Gemma's whitespace runs and HTML tags, Qwen's "<tool_call>")
are tokens either way, as in Hugging Face tokenizers: they are not what this guards.
"""

from __future__ import annotations

import weakref

import llama_cpp

from edge_infer.chat.literal_text import ControlTexts, Part
from edge_infer.engine.llama import LlamaModel

# The attributes llama.cpp parses only with parse_special (llama-vocab.cpp, tokenizer_st_partition).
PARSED_ONLY_AS_SPECIAL = llama_cpp.LLAMA_TOKEN_ATTR_CONTROL | llama_cpp.LLAMA_TOKEN_ATTR_UNKNOWN

_cache: "weakref.WeakKeyDictionary[LlamaModel, ControlTexts]" = weakref.WeakKeyDictionary()


def control_texts(model: LlamaModel) -> ControlTexts:
    """The texts of the model's control and unknown tokens (read once per model)."""
    found = _cache.get(model)
    if found is None:
        texts = []
        for token in range(model.n_vocab):
            if llama_cpp.llama_vocab_get_attr(model.vocab, token) & PARSED_ONLY_AS_SPECIAL:
                raw = llama_cpp.llama_vocab_get_text(model.vocab, token)
                if raw:
                    texts.append(raw.decode("utf-8", "replace"))
        found = _cache[model] = ControlTexts(texts)
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
