"""Which reasoning blocks may be forwarded to which provider, decided in one place.

A reasoning block's signature (or OpenAI's ``encrypted_content``) is only valid on the wire that
minted it: a foreign signature is a hard 400. Every wire adapter and the host-facing sanitizer ask
:func:`reasoning_wire_action`, so what a sanitized history holds can never drift from what the wire
actually sends.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, TypeAlias

import msgspec

from ..contracts import AssistantMessage, Content, ContentPart, Message, ReasoningPart
from ..errors import UsageError
from ._common import EMPTY_TURN_PLACEHOLDER, Rewriter

__all__ = (
    "REASONING_TARGETS",
    "ReasoningTarget",
    "ReasoningWireAction",
    "reasoning_wire_action",
    "sanitize_history_for_provider",
)

ReasoningTarget: TypeAlias = Literal["anthropic", "openai", "google"]
ReasoningWireAction: TypeAlias = Literal["keep", "drop", "strip_signature"]
REASONING_TARGETS: tuple[ReasoningTarget, ...] = ("anthropic", "openai", "google")


def _signed(block: ReasoningPart) -> bool:
    return bool(block.signature) or bool(block.encrypted_content)


def reasoning_wire_action(block: ReasoningPart, target: ReasoningTarget) -> ReasoningWireAction:
    """Decide what happens to ``block`` on the wire to ``target``.

    Anthropic: a redacted block is kept (it must be echoed); a block tagged with any other provider is
    dropped (foreign signatures are not Anthropic HMACs); an unsigned block is dropped (Anthropic
    requires a signature); a signed block tagged ``anthropic`` *or untagged* is kept — untagged signed
    blocks come from sessions older than provenance tagging and are most plausibly Anthropic's.

    OpenAI and Google: a redacted block is dropped (Anthropic-only); a block tagged ``anthropic`` is
    dropped (its HMAC is valid nowhere else); a signed block from this same provider is kept; a block
    signed by another provider, or signed but untagged, is ``strip_signature`` — the text survives and
    the opaque token is withheld, because these wires have no recovery from a signature rejection. An
    unsigned block is kept (there is nothing to reject).

    Raises :class:`~bindloop.errors.UsageError` for an unknown target.
    """
    if target == "anthropic":
        if block.redacted:
            return "keep"
        if block.provider is not None and block.provider != "anthropic":
            return "drop"
        return "keep" if block.signature else "drop"
    if target not in ("openai", "google"):
        raise UsageError(f"unknown reasoning target {target!r}; expected one of {REASONING_TARGETS}")
    if block.redacted or block.provider == "anthropic":
        return "drop"
    if not _signed(block) or block.provider == target:
        return "keep"
    return "strip_signature"


def _strip(block: ReasoningPart) -> ReasoningPart:
    return msgspec.structs.replace(block, signature=None, encrypted_content=None)


def sanitize_history_for_provider(messages: Sequence[Message],
                                  target: ReasoningTarget) -> Sequence[Message]:
    """Apply :func:`reasoning_wire_action` to every reasoning block of every assistant turn.

    For hosts that load history from a store (or old, untagged sessions) and want foreign signatures
    gone from their source of truth in one call. Only assistant turns that changed are new objects;
    everything else passes through by reference, and the input object itself is returned when nothing
    changed. An assistant turn left with no content and no tool calls gets
    :data:`EMPTY_TURN_PLACEHOLDER` so role boundaries stay where they were. Idempotent.
    """
    if target not in REASONING_TARGETS:
        raise UsageError(f"unknown reasoning target {target!r}; expected one of {REASONING_TARGETS}")
    rw = Rewriter(messages)
    for i, m in enumerate(messages):
        if not isinstance(m, AssistantMessage) or isinstance(m.content, (str, type(None))):
            rw.keep(i)
            continue
        parts: list[ContentPart] | None = None
        for k, part in enumerate(m.content):
            new: ContentPart | None = part
            if isinstance(part, ReasoningPart):
                action = reasoning_wire_action(part, target)
                new = None if action == "drop" else _strip(part) if action == "strip_signature" else part
            if new is not part and parts is None:
                parts = list(m.content[:k])
            if parts is not None and new is not None:
                parts.append(new)
        if parts is None:
            rw.keep(i)
            continue
        content: Content | None = tuple(parts) if parts else None
        if content is None and not m.tool_calls:
            content = EMPTY_TURN_PLACEHOLDER
        rw.edit(i, (msgspec.structs.replace(m, content=content),))
    return rw.result()
