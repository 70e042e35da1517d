"""Running a compaction: one summary call over an injected model, with bounded retries."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Final

import msgspec

from ..contracts import (
    Content,
    Message,
    SystemMessage,
    TextPart,
    TurnUsage,
    UserMessage,
    add_usage,
)
from ..model import Model, ModelRequest
from ..errors import ProviderError, RunCancelledError, is_prompt_too_long as _is_prompt_too_long
from ..signal import AbortSignal
from ..transcript import validate_and_heal_messages
from ._errors import (
    CompactEmptySummaryError,
    CompactPromptTooLongError,
)
from ._partition import CompactScope, partition_for_compaction, shrink_for_prompt_too_long
from ._partition import strip_attachments

__all__ = (
    "DEFAULT_SUMMARY_INSTRUCTIONS",
    "SUMMARY_REQUEST",
    "CompactResult",
    "build_summary_prompt",
    "compact_conversation",
)


DEFAULT_SUMMARY_INSTRUCTIONS: Final = (
    "You write the working memory of an agent whose conversation is being compacted. Summarize the "
    "conversation you are given so the agent can continue without it: the user's goals and "
    "constraints, decisions made and why, what each tool call established (paths, ids, numbers, "
    "errors), work completed, and what remains to do. Be specific and complete; omit pleasantries."
)
SUMMARY_REQUEST: Final = "Summarize the conversation above as instructed."


class CompactResult(msgspec.Struct, frozen=True, kw_only=True):
    """A summary of ``messages[start:stop]`` of the compacted input (``start`` moves past any head
    rounds dropped on prompt-too-long retries; those stay verbatim). ``usage`` and ``cost`` total
    every attempt that returned; ``attempts`` counts model calls."""

    summary: str
    start: int
    stop: int
    usage: TurnUsage = TurnUsage()
    cost: int = 0
    attempts: int = 1


def build_summary_prompt(to_summarize: Sequence[Message],
                         instructions: str = DEFAULT_SUMMARY_INSTRUCTIONS) -> list[Message]:
    """The messages sent for a summary: the instructions as a system message, the slice without its
    own system messages and attachments, healed so any provider accepts it, and a closing request.

    The request is the only user turn after the slice, never a second one in a row: it is the
    healer's directive when the slice ends with an assistant turn (instead of a generic "Continue."),
    and it is appended to the slice's last message when that is a user message."""
    body = [m for m in to_summarize if not isinstance(m, SystemMessage)]
    healed = validate_and_heal_messages(strip_attachments(body), directive=SUMMARY_REQUEST)
    messages = list(healed.messages)
    if any(issue.kind == "trailing_assistant" for issue in healed.issues):
        pass  # the healer's user tail is the request itself
    elif messages and isinstance(messages[-1], UserMessage):
        messages[-1] = _with_request(messages[-1])
    else:
        messages.append(UserMessage(content=SUMMARY_REQUEST))
    return [SystemMessage(content=instructions), *messages]


def _with_request(message: UserMessage) -> UserMessage:
    content = message.content
    if isinstance(content, str):
        merged: Content = f"{content}\n\n{SUMMARY_REQUEST}" if content else SUMMARY_REQUEST
    else:
        merged = (*content, TextPart(text=SUMMARY_REQUEST))
    return msgspec.structs.replace(message, content=merged)


def _default_transient(exc: BaseException) -> bool:
    return isinstance(exc, ProviderError)


def _raise_if_aborted(signal: AbortSignal | None) -> None:
    if signal is not None and signal.aborted:
        reason = signal.reason
        if isinstance(reason, BaseException):
            raise reason
        raise RunCancelledError("compaction aborted" if reason is None else str(reason))


async def compact_conversation(
    *,
    model: Model,
    messages: Sequence[Message],
    scope: CompactScope = "full",
    signal: AbortSignal | None = None,
    max_retries: int = 3,
    max_transient_retries: int = 2,
    instructions: str = DEFAULT_SUMMARY_INSTRUCTIONS,
    is_prompt_too_long: Callable[[BaseException], bool] = _is_prompt_too_long,
    is_transient: Callable[[BaseException], bool] = _default_transient,
) -> CompactResult:
    """Summarize part of ``messages`` (chosen by ``scope``) with one call of ``model``'s
    :meth:`~bindloop.model.Model.complete` (no tools; ``signal`` is its request's).

    On prompt-too-long (``is_prompt_too_long``; by default
    :func:`bindloop.errors.is_prompt_too_long`, which follows ``__cause__``, so a routed model's
    attempt error caused by the provider's refusal counts) the head of the slice is shrunk (:func:`shrink_for_prompt_too_long`) and the
    call retried, up to ``max_retries`` times; :class:`CompactPromptTooLongError` when that budget runs
    out or nothing is left to drop. A transient failure (``is_transient``; by default any
    :class:`~bindloop.errors.ProviderError`) or an empty summary is retried up to
    ``max_transient_retries`` times, then the last error is re-raised (or
    :class:`CompactEmptySummaryError`). An abort is re-raised unchanged: a fired ``signal`` is checked
    before each call and wins over any error that arrives with it; cancellation exceptions are never
    caught. :class:`~bindloop.compaction.CompactInvalidInputError` is raised before any call.
    ``messages`` is never modified.
    """
    part = partition_for_compaction(messages, scope)
    chunk = part.to_summarize
    start = part.start
    ptl_retries = 0
    transient_retries = 0
    attempts = 0
    usage = TurnUsage()
    cost = 0
    while True:
        _raise_if_aborted(signal)
        attempts += 1
        try:
            result = await model.complete(build_summary_prompt(chunk, instructions),
                                          ModelRequest(signal=signal))
        except Exception as exc:
            if signal is not None and signal.aborted:
                raise
            if is_prompt_too_long(exc):
                if ptl_retries >= max_retries:
                    raise CompactPromptTooLongError(
                        f"summary prompt still too long after {ptl_retries} head-drop retries",
                        attempts=attempts) from exc
                shrunk = shrink_for_prompt_too_long(chunk)
                if shrunk is chunk:
                    raise CompactPromptTooLongError(
                        "summary prompt too long and a single round is left", attempts=attempts
                    ) from exc
                ptl_retries += 1
                start += len(chunk) - len(shrunk)
                chunk = shrunk
                continue
            if is_transient(exc) and transient_retries < max_transient_retries:
                transient_retries += 1
                continue
            raise
        usage = add_usage(usage, result.usage)
        cost += result.cost
        summary = (result.text or "").strip()
        if summary:
            return CompactResult(summary=summary, start=start, stop=part.stop, usage=usage,
                                 cost=cost, attempts=attempts)
        if transient_retries >= max_transient_retries:
            raise CompactEmptySummaryError(f"the model returned no summary text in {attempts} calls")
        transient_retries += 1
