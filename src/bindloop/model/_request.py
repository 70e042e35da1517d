"""What one model call is asked for besides the messages: tools, tool choice, a JSON schema."""

from __future__ import annotations

from typing import Any, Literal, TypeAlias

import msgspec

from ..contracts import ToolDefinition
from ..signal import AbortSignal

__all__ = ("ForcedTool", "JsonSchemaFormat", "ModelRequest", "StructuredOutputMode", "ToolChoice")


class ForcedTool(msgspec.Struct, frozen=True, kw_only=True):
    """``tool_choice`` that forces one named tool."""

    name: str


ToolChoice: TypeAlias = Literal["auto", "none", "required"] | ForcedTool
"""Which tools the model may call this turn: its own choice (``"auto"``), none, at least one, or
one named tool."""


class JsonSchemaFormat(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """Structured output: the answer text must be JSON matching ``schema``."""

    name: str
    schema: dict[str, object]
    strict: bool = True
    description: str | None = None


StructuredOutputMode: TypeAlias = Literal["json_schema", "tool"]
"""How a model takes a structured-output request: the provider's native JSON-schema mode, or a
forced output tool whose arguments are the answer."""


class ModelRequest(msgspec.Struct, frozen=True, kw_only=True):
    """What one model call is asked for besides the messages.

    ``tools`` and ``tool_choice`` are the turn's tool surface; ``schema`` (already
    strict-converted) asks for JSON text matching it, named ``schema_name`` (a model whose
    :attr:`~bindloop.model.Model.structured_output` is ``"tool"`` is never sent one: the agent
    offers a forced output tool instead); ``signal`` cancels the call; ``additional_options`` are
    the model's own per-call settings, forwarded untouched (``WireOptions`` field names for the
    wire's models)."""

    tools: tuple[ToolDefinition, ...] = ()
    schema: dict[str, Any] | None = None
    schema_name: str = "final_result"
    tool_choice: ToolChoice | None = None
    signal: AbortSignal | None = None
    additional_options: dict[str, Any] | None = None
