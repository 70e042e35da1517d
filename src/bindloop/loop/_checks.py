"""Shape checks for what ports hand the loop.

msgspec Structs do not type-check their constructor arguments, so a port can build a
``ToolResult(content=5)`` or a ``TurnUsage(input_tokens=-1)`` that would only fail later, when the
transcript is persisted or a provider refuses it. The loop checks every value at the port boundary
instead and raises a typed error naming the port and the field. Each check is O(size of the value),
never O(transcript).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from ..contracts import (
    AssistantMessage,
    FilePart,
    ModelTurnResult,
    ImagePart,
    Message,
    ProviderItemPart,
    ReasoningPart,
    TextPart,
    ToolCall,
    ToolDefinition,
    ToolError,
    ToolResult,
    ToolSuspend,
    TurnUsage,
)
from ..errors import PortContractError, ProtocolError, UsageError
from ._errors import InvalidModelTurnError

__all__ = (
    "check_batch_outcomes",
    "check_bool",
    "check_content",
    "check_decisions",
    "check_messages",
    "check_outcome",
    "check_resume_calls",
    "check_sync_result",
    "check_tools",
    "check_turn",
    "check_usage",
)

_PART_TYPES = (TextPart, ImagePart, FilePart, ReasoningPart, ProviderItemPart)
# The message classes, from the Message union itself (a tuple: isinstance's quickest form).
_MESSAGE_TYPES: Final = Message.__args__
# The exact classes, looked up first: isinstance() against a tuple of Struct classes pays a call
# of the metaclass's __instancecheck__ for each class it misses before the one that fits.
_EXACT_MESSAGE_TYPES: Final = frozenset(_MESSAGE_TYPES)
_SUSPEND_MODES = ("waiting_for_reply", "resuming_later")


def check_content(value: object, where: str, error: type[UsageError] = PortContractError) -> None:
    """A ``Content``: a str, or a tuple of content parts."""
    if isinstance(value, str):
        return
    if not isinstance(value, tuple):
        raise error(f"{where} must be a str or a tuple of content parts, got {type(value).__name__}")
    for k, part in enumerate(value):
        if not isinstance(part, _PART_TYPES):
            raise error(f"{where}[{k}] is {type(part).__name__}, not a content part")


def _str_tuple(value: object, where: str) -> None:
    if value == ():  # the common case: no activation requested
        return
    if not isinstance(value, tuple) or not all(isinstance(v, str) and v for v in value):
        raise PortContractError(f"{where} must be a tuple of non-empty str, got {value!r}")


def check_outcome(outcome: object, call: ToolCall, port: str = "run_tool_call") -> None:
    """What ``port`` (``run_tool_call`` unless told) returned for ``call``."""
    if (type(outcome) is ToolResult and type(outcome.content) is str
            and outcome.activate_plugins == () and outcome.activate_skills == ()):
        return  # the common outcome: text, no activation
    call_id = call.id
    where = f"{port}({call_id!r})"
    if isinstance(outcome, ToolResult):
        check_content(outcome.content, f"{where}.content")
        _str_tuple(outcome.activate_plugins, f"{where}.activate_plugins")
        _str_tuple(outcome.activate_skills, f"{where}.activate_skills")
    elif isinstance(outcome, ToolError):
        if not isinstance(outcome.error, str) or not isinstance(outcome.kind, str):
            raise PortContractError(f"{where}: ToolError.error and .kind must be str")
    elif isinstance(outcome, ToolSuspend):
        if outcome.mode not in _SUSPEND_MODES:
            raise PortContractError(
                f"{where}: ToolSuspend.mode must be one of {_SUSPEND_MODES}, got {outcome.mode!r}")
        if outcome.detail is not None and not isinstance(outcome.detail, str):
            raise PortContractError(f"{where}: ToolSuspend.detail must be a str or None")
        if outcome.state is not None and not isinstance(outcome.state, str):
            raise PortContractError(f"{where}: ToolSuspend.state must be a str or None")
    else:
        raise PortContractError(
            f"{port} returned {type(outcome).__name__} for call {call_id!r} of tool "
            f"{call.name!r}; expected ToolResult, ToolError or ToolSuspend"
        )


def check_batch_outcomes(outcomes: object, calls: Sequence[ToolCall]) -> Sequence[Any]:
    """What ``run_tool_batch`` returned for ``calls``: a list or tuple of one checked outcome per
    call, in order."""
    if not isinstance(outcomes, (list, tuple)) or len(outcomes) != len(calls):
        got = (f"{len(outcomes)} outcomes" if isinstance(outcomes, (list, tuple))
               else type(outcomes).__name__)
        raise PortContractError(f"run_tool_batch returned {got} for {len(calls)} calls; "
                                "expected one ToolOutcome per call, in order")
    for outcome, call in zip(outcomes, calls):
        check_outcome(outcome, call, "run_tool_batch")
    return outcomes


def check_usage(usage: object, where: str, error: type[UsageError] = PortContractError) -> None:
    """A ``TurnUsage`` of non-negative ints."""
    if not isinstance(usage, TurnUsage):
        raise error(f"{where} must be a TurnUsage, got {type(usage).__name__}")
    # `type(v) is int` is the fast path (and excludes bool); anything else gets the full check.
    if (type(usage.input_tokens) is int and usage.input_tokens >= 0
            and type(usage.output_tokens) is int and usage.output_tokens >= 0
            and type(usage.cached_input_tokens) is int and usage.cached_input_tokens >= 0
            and type(usage.reasoning_tokens) is int and usage.reasoning_tokens >= 0
            and type(usage.cache_write_tokens) is int and usage.cache_write_tokens >= 0):
        return
    for field in ("input_tokens", "output_tokens", "cached_input_tokens", "reasoning_tokens",
                  "cache_write_tokens"):
        value = getattr(usage, field)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise error(f"{where}.{field} must be a non-negative int, got {value!r}")


def check_messages(value: object, where: str) -> Sequence[Any]:
    """A list or tuple of canonical messages whose contents are well-formed."""
    if not isinstance(value, (list, tuple)):
        raise PortContractError(
            f"{where} must be a list or tuple of messages, got {type(value).__name__}")
    for k, message in enumerate(value):
        if type(message) not in _EXACT_MESSAGE_TYPES and not isinstance(message, _MESSAGE_TYPES):
            raise PortContractError(f"{where}[{k}] is {type(message).__name__}, not a Message")
        content = message.content
        if content is not None or not isinstance(message, AssistantMessage):
            check_content(content, f"{where}[{k}].content")
    return value


def check_resume_calls(suspends: Sequence[Any], calls: object) -> tuple[ToolCall, ...]:
    """``ToolLoopParams.resume_calls`` checked: each a :class:`ToolCall` naming an open suspend's
    call id and tool, once (its arguments may differ: an approver's edit)."""
    if isinstance(calls, (str, bytes)) or not isinstance(calls, Sequence):
        raise UsageError(f"resume_calls must be a sequence of ToolCall, got {type(calls).__name__}")
    waiting = {s.tool_call_id: s.tool_name for s in suspends}
    for call in calls:
        if (not isinstance(call, ToolCall) or not isinstance(call.arguments, str)
                or waiting.pop(call.id, None) != call.name):
            raise UsageError(f"resume_calls: a {type(call).__name__} that is not the call of an "
                             "open suspend (each names an open suspend's call id and tool, once)")
    return tuple(calls)


def check_bool(value: object, port: str) -> bool:
    """The answer of a synchronous predicate port. A coroutine means an ``async def`` was wired
    where the loop calls synchronously: it is closed (no "never awaited" warning) and refused."""
    if isinstance(value, bool):
        return value
    _refuse_awaitable(value, port)
    raise PortContractError(f"{port} must return a bool, got {type(value).__name__}")


def check_decisions(flags: object, calls: int, answer: str, port: str) -> Sequence[bool]:
    """A decision answer (``BatchPlanned``, ``FinalChecked``): a list or tuple of one ``port``
    answer per call, in order (:class:`ProtocolError` otherwise), each a bool."""
    if not isinstance(flags, (list, tuple)) or len(flags) != calls:
        got = f"{len(flags)} answers" if isinstance(flags, (list, tuple)) else repr(flags)
        raise ProtocolError(f"{answer} has {got} for {calls} calls; expected one {port} answer "
                            "per call, in order")
    for flag in flags:
        if type(flag) is not bool:
            check_bool(flag, port)  # raises, naming the port
    return flags


def _refuse_awaitable(value: object, port: str) -> None:
    close = getattr(value, "close", None)
    if hasattr(value, "__await__"):
        if callable(close):
            close()
        raise PortContractError(
            f"{port} returned an awaitable; it is called synchronously, so wire a plain function")


def check_sync_result(value: object, port: str) -> None:
    """A synchronous observer port must not return an awaitable (it would never run)."""
    _refuse_awaitable(value, port)


def check_tools(tools: object) -> tuple[ToolDefinition, ...]:
    """What ``build_tools`` returned: a sequence of tool definitions (copied into a tuple)."""
    if isinstance(tools, (str, bytes)) or not isinstance(tools, Sequence):
        raise PortContractError(
            f"build_tools returned {type(tools).__name__}; expected a sequence of ToolDefinition"
        )
    out = tuple(tools)
    for k, tool in enumerate(out):
        if not isinstance(tool, ToolDefinition):
            raise PortContractError(
                f"build_tools()[{k}] is {type(tool).__name__}; expected ToolDefinition"
            )
    return out


def check_turn(result: object) -> tuple[ToolCall, ...]:
    """What ``call_model`` returned: a well-formed :class:`ModelTurnResult`; its tool calls."""
    if not isinstance(result, ModelTurnResult):
        raise PortContractError(
            f"call_model returned {type(result).__name__}; expected ModelTurnResult"
        )
    calls = result.tool_calls
    if not isinstance(calls, tuple):
        raise InvalidModelTurnError(
            f"tool_calls must be a tuple of ToolCall, got {type(calls).__name__}"
        )
    if calls:
        seen: set[str] = set()
        for k, call in enumerate(calls):
            if not isinstance(call, ToolCall):
                raise InvalidModelTurnError(f"tool_calls[{k}] is {type(call).__name__}, not ToolCall")
            if not isinstance(call.id, str) or not call.id:
                raise InvalidModelTurnError(f"tool_calls[{k}] has no id (got {call.id!r})")
            if not isinstance(call.name, str) or not call.name:
                raise InvalidModelTurnError(f"tool_calls[{k}] ({call.id}) has no name")
            if not isinstance(call.arguments, str):
                raise InvalidModelTurnError(
                    f"tool_calls[{k}] ({call.id}) arguments must be the raw JSON string, got "
                    f"{type(call.arguments).__name__}"
                )
            if call.id in seen:
                raise InvalidModelTurnError(f"tool_calls[{k}] repeats id {call.id!r} within the turn")
            seen.add(call.id)
    check_usage(result.usage, "usage", InvalidModelTurnError)
    if result.text is not None and not isinstance(result.text, str):
        raise InvalidModelTurnError(f"text must be a str or None, got {type(result.text).__name__}")
    if not isinstance(result.accept_message, bool):
        raise InvalidModelTurnError(
            f"accept_message must be a bool, got {type(result.accept_message).__name__}")
    if result.reasoning != () and (not isinstance(result.reasoning, tuple) or not all(
            isinstance(r, ReasoningPart) for r in result.reasoning)):
        raise InvalidModelTurnError("reasoning must be a tuple of ReasoningPart")
    if isinstance(result.cost, bool) or not isinstance(result.cost, int):
        raise InvalidModelTurnError(f"cost must be an int in the host's unit, got {result.cost!r}")
    return calls
