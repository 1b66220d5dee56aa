"""Which family a model speaks: each family module defines FAMILY; family_for() tries them
in priority order, the fallback (detect=None, generic JSON) last."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from edge_infer.chat.families.family import Family
from edge_infer.chat.families.syntax import CallWrapper

if TYPE_CHECKING:
    from edge_infer.chat.template import ChatTemplate

_MODULES = ("hermes", "llama3", "mistral", "gemma", "generic")
_ADDED: dict[str, Family] = {}  # registered at run time (a test's or a plug-in's family)


def all_families() -> list[Family]:
    """Every family, in the order they are tried (the fallback last)."""
    found: dict[str, Family] = {}
    for mod in _MODULES:
        for fam in importlib.import_module(f"edge_infer.chat.families.{mod}").FAMILIES:
            found[fam.name] = fam
    found.update(_ADDED)
    return sorted(found.values(), key=lambda f: (f.detect is None, f.priority))


def register(family: Family) -> Family:
    _ADDED[family.name] = family
    return family


def unregister(name: str) -> None:
    _ADDED.pop(name, None)


def family_names() -> list[str]:
    return [f.name for f in all_families()]


def family_for(chat_template: str | None, architecture: str | None = None) -> Family:
    """The family a model speaks, from markers in its chat template."""
    tmpl, arch = chat_template or "", (architecture or "").lower()
    ordered = all_families()
    return next((f for f in ordered if f.detect is not None and f.detect(tmpl, arch)), ordered[-1])


def family_named(name: str) -> Family:
    for fam in all_families():
        if fam.name == name:
            return fam
    raise KeyError(name)


def family_for_model(template: "ChatTemplate | None", architecture: str | None = None,
                     forced: bool = False) -> Family:
    """The syntax a loaded model writes its calls in: its template's family, or Hermes where
    its template has no tool support (the tools were shown to it Hermes-style, see
    chat/tool_prompt.py), where there is no template (a saved conversation's model), or
    where a call is forced and the family has no grammar wrapper to write it in. Server
    and TUI agree."""
    if template is None or not template.supports_tools:
        return family_named("hermes")
    family = family_for(template.source, architecture)
    return family_named("hermes") if forced and family.wrapper is None else family


def call_syntaxes() -> dict[str, CallWrapper]:
    """family name -> the call syntax its grammars write (families that have one)."""
    return {f.name: f.wrapper for f in all_families() if f.wrapper is not None}
