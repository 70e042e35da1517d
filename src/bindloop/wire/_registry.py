"""Adapters by wire name, for hosts that pick a wire from configuration. Each wire's module is
imported the first time its adapter is asked for: a host that uses one wire loads one."""

from __future__ import annotations

from importlib import import_module
from types import MappingProxyType
from typing import Final

from ..errors import UsageError
from ._types import WireAdapter, WireName

__all__ = ("LAZY_NAMES", "WIRE_NAMES", "create_wire_adapter", "load_wire_name")

WIRE_NAMES: tuple[WireName, ...] = ("openai_chat", "openai_responses", "anthropic", "gemini")

LAZY_NAMES: Final = MappingProxyType({
    "OpenAIChatAdapter": "_openai_chat",
    "OpenAIResponsesAdapter": "_openai_responses",
    "AnthropicAdapter": "_anthropic",
    "GeminiAdapter": "_gemini",
    "gemini_schema": "_gemini",
})
"""The names of ``bindloop.wire`` defined in a wire's own module, loaded on first use."""

_ADAPTERS: Final = MappingProxyType({
    "openai_chat": "OpenAIChatAdapter",
    "openai_responses": "OpenAIResponsesAdapter",
    "anthropic": "AnthropicAdapter",
    "gemini": "GeminiAdapter",
})


def load_wire_name(name: str) -> object:
    """The object ``name`` of :data:`LAZY_NAMES`, its wire's module imported now if it was not."""
    return getattr(import_module(f".{LAZY_NAMES[name]}", __package__), name)


def create_wire_adapter(name: str) -> WireAdapter:
    """A new adapter with default settings for ``name`` (one of :data:`WIRE_NAMES`); only that
    wire's module is imported."""
    adapter = _ADAPTERS.get(name)
    if adapter is None:
        raise UsageError(f"unknown wire {name!r}; expected one of {WIRE_NAMES}")
    made: WireAdapter = load_wire_name(adapter)()  # type: ignore[operator]
    return made
