"""Adapters by wire name, for hosts that pick a wire from configuration."""

from __future__ import annotations

from ..errors import UsageError
from ._anthropic import AnthropicAdapter
from ._gemini import GeminiAdapter
from ._openai_chat import OpenAIChatAdapter
from ._openai_responses import OpenAIResponsesAdapter
from ._types import WireAdapter, WireName

__all__ = ("WIRE_NAMES", "create_wire_adapter")

WIRE_NAMES: tuple[WireName, ...] = ("openai_chat", "openai_responses", "anthropic", "gemini")


def create_wire_adapter(name: str) -> WireAdapter:
    """A new adapter with default settings for ``name`` (one of :data:`WIRE_NAMES`)."""
    if name == "openai_chat":
        return OpenAIChatAdapter()
    if name == "openai_responses":
        return OpenAIResponsesAdapter()
    if name == "anthropic":
        return AnthropicAdapter()
    if name == "gemini":
        return GeminiAdapter()
    raise UsageError(f"unknown wire {name!r}; expected one of {WIRE_NAMES}")
