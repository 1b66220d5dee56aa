"""Fallback: a whole reply that is a JSON call object/array, or one in a ```json fence."""

from __future__ import annotations

from edge_infer.chat.families.matchers import BareJson, FencedJson
from edge_infer.chat.families.family import Family


def generic_matchers() -> list:
    return [FencedJson(), BareJson()]


FAMILIES = (Family("generic", detect=None, matchers=generic_matchers, triggers=("```json", "{", "[")),)
