"""Reading and writing checkpoints: strict parsing, stable bytes, and the invariants a stored
checkpoint must satisfy.

Parsing is two passes. msgspec checks the shape and every type (unknown fields in the checkpoint's
own Structs are errors); then :func:`check_invariants` refuses states no bindloop run can produce —
counters below zero, an open suspend on a finished checkpoint, a tool call of the last tool-call turn
that is neither answered nor an open suspend. Either way the error is a
:class:`CheckpointFormatError` naming the field, and nothing half-read is returned.

A transcript is validated once. A checkpoint that :func:`require_checkpoint` or
:func:`parse_loop_checkpoint` returned carries a mark (in its ``__dict__``, outside its fields, so
equality, bytes, pickling and ``msgspec.structs.replace`` ignore it) holding its field values:
every message in it holds only strings, numbers, booleans, ``None``, tuples and the frozen message
Structs, and every other field is frozen too except two dicts, ``bindings`` and ``stats.tools``.
Validating it again with the same field values (a store's encode of what a run committed, a run's
start from a loaded checkpoint) checks only those dicts; with its messages tuple unchanged,
everything but the messages. A run's driver passes the previous checkpoint's messages as
``known``, so a commit checks only the messages its turn added.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from operator import is_
from typing import Any, Final

import msgspec

from ..contracts import AssistantMessage, Message, RunStats, ToolCall, ToolMessage
from ..errors import UsageError
from ._errors import CheckpointFormatError, UnsupportedCheckpointVersionError
from ._schema import CHECKPOINT_VERSION, LoopBindings, LoopCheckpoint

__all__ = (
    "check_invariants",
    "copy_bindings",
    "json_copy",
    "parse_loop_checkpoint",
    "require_checkpoint",
    "serialize_loop_checkpoint",
    "validate_loop_checkpoint",
)

_SUPPORTED: Final = (CHECKPOINT_VERSION,)
# "deterministic" sorts dict keys (bindings, per-tool stats) but keeps Struct field order, so equal
# checkpoints give equal bytes whatever order their dicts were built in.
_ENCODER: Final = msgspec.json.Encoder(order="deterministic")
_JSON_DECODER: Final = msgspec.json.Decoder()
_AT: Final = re.compile(r" - at `\$(?P<path>[^`]*)`$")
_MISSING: Final = re.compile(r"^Object (?:missing required|contains unknown) field `(?P<name>[^`]+)`")
_INT_MIN: Final = -(2**63)
_INT_MAX: Final = 2**64 - 1
_MAX_DEPTH: Final = 64
_LONE_SURROGATE: Final = re.compile("[\ud800-\udfff]")
# The keys of the mark in a LoopCheckpoint's __dict__: its field values when it was validated, and
# the bytes its stats (whose ``tools`` is a dict) encoded to then.
_CHECKED: Final = "checked_fields"
_CHECKED_STATS: Final = "checked_stats"
_MESSAGES_AT: Final = LoopCheckpoint.__struct_fields__.index("messages")
_MESSAGE_TUPLE: Final = tuple[Message, ...]
_MESSAGES_DECODER: Final = msgspec.json.Decoder(_MESSAGE_TUPLE, strict=True)
_CHECKPOINT_DECODER: Final = msgspec.json.Decoder(LoopCheckpoint, strict=True)
# Known messages are also found whole this many messages in (leading system prompts).
_KNOWN_OFFSET: Final = 4


# ---- JSON values (bindings) --------------------------------------------------------------------

def json_copy(value: object, where: str, depth: int = 0) -> Any:
    """A fresh deep copy of a JSON value, or :class:`CheckpointFormatError` naming ``where``.

    Tuples become lists and ``-0.0`` becomes ``0.0``, so equal values encode to equal bytes; NaN,
    infinities, non-string keys, integers msgspec cannot encode and anything that is not JSON are
    refused rather than silently changed on the way to storage.
    """
    try:
        return _plain_copy(value, depth)
    except _NotPlain:
        return _named_copy(value, where, depth)


class _NotPlain(Exception):
    """A value :func:`_plain_copy` does not copy itself; :func:`_named_copy` decides."""


def _plain_copy(value: Any, depth: int) -> Any:
    # json_copy's common case, with exact types and no field names built: each value's path is
    # only needed for an error, so anything unusual goes to _named_copy, which copies or refuses
    # it exactly as before.
    if depth > _MAX_DEPTH:
        raise _NotPlain
    t = type(value)
    if t is str or t is bool or value is None:
        return value
    if t is int:
        if not _INT_MIN <= value <= _INT_MAX:
            raise _NotPlain
        return value
    if t is float:
        if not math.isfinite(value):
            raise _NotPlain
        return value + 0.0
    if t is dict:
        out: dict[str, Any] = {}
        for key, item in value.items():
            if type(key) is not str:
                raise _NotPlain
            out[key] = _plain_copy(item, depth + 1)
        return out
    if t is list or t is tuple:
        return [_plain_copy(item, depth + 1) for item in value]
    raise _NotPlain


def _named_copy(value: object, where: str, depth: int) -> Any:
    if depth > _MAX_DEPTH:
        raise CheckpointFormatError(where, f"nested deeper than {_MAX_DEPTH} levels")
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        if not _INT_MIN <= value <= _INT_MAX:
            raise CheckpointFormatError(where, f"integer {value} is outside the 64-bit range")
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise CheckpointFormatError(where, f"{value!r} is not a JSON number")
        return value + 0.0
    if isinstance(value, (list, tuple)):
        return [_named_copy(v, f"{where}[{i}]", depth + 1) for i, v in enumerate(value)]
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, v in value.items():
            if not isinstance(key, str):
                raise CheckpointFormatError(where, f"object key {key!r} is not a string")
            out[key] = _named_copy(v, f"{where}.{key}", depth + 1)
        return out
    raise CheckpointFormatError(where, f"{type(value).__name__} is not a JSON value")


def copy_bindings(bindings: object, where: str = "bindings") -> LoopBindings:
    """Validate ``bindings`` and return a copy that shares nothing mutable with it."""
    if not isinstance(bindings, LoopBindings):
        raise CheckpointFormatError(where, f"expected LoopBindings, got {type(bindings).__name__}")
    config = json_copy(bindings.config, f"{where}.config")
    environment = json_copy(bindings.environment, f"{where}.environment")
    for name, value in (("config", config), ("environment", environment)):
        if not isinstance(value, dict):
            raise CheckpointFormatError(f"{where}.{name}", "must be a JSON object")
    return LoopBindings(config=config, environment=environment)


# ---- invariants --------------------------------------------------------------------------------

def _count(value: object, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise CheckpointFormatError(field, f"expected an integer, got {type(value).__name__}")
    if value < 0:
        raise CheckpointFormatError(field, f"must be >= 0, got {value}")
    return value


def _ms(value: object, field: str) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise CheckpointFormatError(field, f"expected a number, got {type(value).__name__}")
    if not math.isfinite(value) or value < 0:
        raise CheckpointFormatError(field, f"must be a finite number >= 0, got {value!r}")


_NUMBERS: Final = frozenset({int, float})
_STAT_COUNTS: Final = ("turns", "tool_calls", "input_tokens", "output_tokens",
                       "cached_input_tokens", "reasoning_tokens", "cache_write_tokens")


def _check_stats(stats: RunStats, field: str) -> None:
    if not _plain_stats(stats):
        _name_stats_problem(stats, field)


def _name_stats_problem(stats: RunStats, field: str) -> None:
    for name in _STAT_COUNTS:
        _count(getattr(stats, name), f"{field}.{name}")
    if isinstance(stats.cost, bool) or not isinstance(stats.cost, int):
        raise CheckpointFormatError(f"{field}.cost", "expected an integer in the host's unit")
    _ms(stats.model_ms, f"{field}.model_ms")
    _ms(stats.tool_ms, f"{field}.tool_ms")
    ran = 0
    for name, t in stats.tools.items():
        ran += _count(t.calls, f"{field}.tools.{name}.calls")
        _ms(t.ms, f"{field}.tools.{name}.ms")
    if ran != stats.tool_calls:
        raise CheckpointFormatError(
            f"{field}.tools", f"per-tool calls add up to {ran}, but tool_calls is {stats.tool_calls}")


def _plain_stats(s: RunStats) -> bool:
    """Whether ``s`` passes :func:`_name_stats_problem`, decided on exact types without naming any
    field: ``False`` sends it there, which names the problem (or accepts an unusual but valid value,
    an int subclass)."""
    if not (type(s.turns) is int and s.turns >= 0 and type(s.tool_calls) is int
            and s.tool_calls >= 0 and type(s.input_tokens) is int and s.input_tokens >= 0
            and type(s.output_tokens) is int and s.output_tokens >= 0
            and type(s.cached_input_tokens) is int and s.cached_input_tokens >= 0
            and type(s.reasoning_tokens) is int and s.reasoning_tokens >= 0
            and type(s.cache_write_tokens) is int and s.cache_write_tokens >= 0
            and type(s.cost) is int
            and type(s.model_ms) in _NUMBERS and 0 <= s.model_ms < math.inf
            and type(s.tool_ms) in _NUMBERS and 0 <= s.tool_ms < math.inf):
        return False
    ran = 0
    for t in s.tools.values():
        calls, ms = t.calls, t.ms
        if not (type(calls) is int and calls >= 0 and type(ms) in _NUMBERS and 0 <= ms < math.inf):
            return False
        ran += calls
    return ran == s.tool_calls


def check_invariants(cp: LoopCheckpoint) -> None:
    """Refuse a well-typed checkpoint that no run can produce. Raises :class:`CheckpointFormatError`
    naming the first offending field."""
    _check_invariants(cp, bindings=True)


def _check_invariants(cp: LoopCheckpoint, *, bindings: bool) -> None:
    # ``bindings=False``: the caller has just validated them (copy_bindings).
    if cp.version != CHECKPOINT_VERSION:
        raise UnsupportedCheckpointVersionError(cp.version, _SUPPORTED)
    if not cp.execution_id:
        raise CheckpointFormatError("execution_id", "must be a non-empty string")
    _count(cp.revision, "revision")
    budget = _count(cp.max_iterations, "max_iterations")
    used = _count(cp.iterations, "iterations")
    if used > budget:
        raise CheckpointFormatError(
            "iterations", f"{used} iterations consumed exceed max_iterations {budget}")
    if cp.status == "iteration_limit" and used != budget:
        raise CheckpointFormatError(
            "status", f"iteration_limit with {used} of {budget} iterations consumed")
    _check_stats(cp.stats, "stats")
    if cp.stats.turns != used:
        raise CheckpointFormatError(
            "stats.turns", f"{cp.stats.turns} model turns recorded but {used} iterations consumed")
    counters = cp.counters
    requested = _count(counters.requested_tool_calls, "counters.requested_tool_calls")
    _count(counters.last_prompt_tokens, "counters.last_prompt_tokens")
    _count(counters.last_output_tokens, "counters.last_output_tokens")
    if requested < cp.stats.tool_calls:
        raise CheckpointFormatError(
            "counters.requested_tool_calls",
            f"{requested} calls requested but stats.tool_calls says {cp.stats.tool_calls} ran")
    _check_tool_calls(cp)
    if bindings:
        copy_bindings(cp.bindings)
    lineage = cp.lineage
    if lineage is not None:
        if not lineage.parent_execution_id:
            raise CheckpointFormatError("lineage.parent_execution_id", "must be a non-empty string")
        if lineage.parent_execution_id == cp.execution_id:
            raise CheckpointFormatError("lineage.parent_execution_id",
                                        "a fork cannot be its own parent")
        _count(lineage.parent_revision, "lineage.parent_revision")
        _count(lineage.parent_iterations, "lineage.parent_iterations")
        _count(lineage.message_count, "lineage.message_count")
    reask = cp.reask
    if not isinstance(reask, msgspec.UnsetType):
        if _count(reask.attempt_turns, "reask.attempt_turns") > used:
            raise CheckpointFormatError("reask.attempt_turns",
                                        f"{reask.attempt_turns} exceed iterations {used}")
        if _count(reask.max_turn_steps, "reask.max_turn_steps") < 1:
            raise CheckpointFormatError("reask.max_turn_steps", "must be at least 1")
        _count(reask.turns_left, "reask.turns_left")
    if not isinstance(cp.approvals, msgspec.UnsetType):
        _check_approvals(cp)


def _check_approvals(cp: LoopCheckpoint) -> None:
    """Every call an approval record names is an open ``waiting_for_reply`` suspend, once."""
    record = cp.approvals
    assert not isinstance(record, msgspec.UnsetType)
    waiting = {s.tool_call_id for s in cp.open_suspends if s.mode == "waiting_for_reply"}
    seen: set[str] = set()
    named = [(f"approvals.pending[{i}]", c) for i, c in enumerate(record.pending)]
    named += [(f"approvals.decided[{i}].call_id", d.call_id)
              for i, d in enumerate(record.decided)]
    for where, call_id in named:
        if call_id in seen:
            raise CheckpointFormatError(where, f"{call_id!r} is listed twice")
        seen.add(call_id)
        if call_id not in waiting:
            raise CheckpointFormatError(where, f"{call_id!r} is not an open waiting_for_reply "
                                        "suspend")


def _check_tool_calls(cp: LoopCheckpoint) -> None:
    """The pairing a settled loop leaves: every call of the transcript's last tool-call turn is
    answered by a tool message after it or listed in ``open_suspends``, and every open suspend is an
    unanswered call of that turn. (Earlier turns were settled before the model was called again, so
    only the last one can hold an unanswered call.) One pass over the tail of the transcript."""
    suspends = cp.open_suspends
    status = cp.status
    if suspends and status in ("ready", "finished", "iteration_limit"):
        raise CheckpointFormatError(
            "open_suspends", f"a {status} checkpoint has no open suspends, found {len(suspends)}")
    if status == "waiting_for_reply" and not any(s.mode == "waiting_for_reply" for s in suspends):
        raise CheckpointFormatError("open_suspends",
                                    "waiting_for_reply needs an open waiting_for_reply suspend")
    if status == "resuming_later" and (
            not suspends or any(s.mode != "resuming_later" for s in suspends)):
        raise CheckpointFormatError(
            "open_suspends", "resuming_later needs open suspends, all of mode resuming_later")
    messages = cp.messages
    last = len(messages) - 1
    calls: tuple[ToolCall, ...] = ()
    while last >= 0:
        m = messages[last]
        if isinstance(m, AssistantMessage) and m.tool_calls:
            calls = m.tool_calls
            break
        last -= 1
    pending: dict[str, str] = {}  # id -> tool name, for the last turn's calls without an answer
    for j, call in enumerate(calls):
        if call.id in pending:
            raise CheckpointFormatError(f"messages[{last}].tool_calls[{j}].id",
                                        f"repeats id {call.id!r} within the turn")
        pending[call.id] = call.name
    in_turn = frozenset(pending)
    for m in messages[last + 1:] if calls else ():
        if isinstance(m, ToolMessage):
            pending.pop(m.tool_call_id, None)
    open_ids: set[str] = set()
    for k, s in enumerate(suspends):
        where = f"open_suspends[{k}].tool_call_id"
        if s.tool_call_id in open_ids:
            raise CheckpointFormatError(where, f"{s.tool_call_id!r} is listed twice")
        open_ids.add(s.tool_call_id)
        name = pending.get(s.tool_call_id)
        if name is None:
            if s.tool_call_id in in_turn:
                raise CheckpointFormatError(where, f"{s.tool_call_id!r} is already answered")
            raise CheckpointFormatError(
                where, f"no tool call {s.tool_call_id!r} in the transcript's last tool-call turn")
        if name != s.tool_name:
            raise CheckpointFormatError(f"open_suspends[{k}].tool_name",
                                        f"{s.tool_name!r} but the call was to {name!r}")
    if len(open_ids) != len(pending):
        j, call = next((j, c) for j, c in enumerate(calls)
                       if c.id in pending and c.id not in open_ids)
        raise CheckpointFormatError(
            f"messages[{last}].tool_calls[{j}]",
            f"tool call {call.id!r} is neither answered by a tool message nor an open suspend")


def _plain_zero(stats: RunStats) -> RunStats:
    """``stats`` with ``-0.0`` times as ``0.0`` (``x + 0.0`` does exactly that), and int times as
    floats, so equal stats encode to equal bytes; ``stats`` itself when that changes nothing."""
    if (_plain_ms(stats.model_ms) and _plain_ms(stats.tool_ms)
            and all(_plain_ms(t.ms) for t in stats.tools.values())):
        return stats
    return msgspec.structs.replace(
        stats, model_ms=stats.model_ms + 0.0, tool_ms=stats.tool_ms + 0.0,
        tools={name: msgspec.structs.replace(t, ms=t.ms + 0.0) for name, t in stats.tools.items()})


def _plain_ms(ms: object) -> bool:
    """Whether ``ms + 0.0`` is ``ms`` itself: a float that is not ``-0.0``."""
    return type(ms) is float and (ms != 0.0 or math.copysign(1.0, ms) > 0.0)


# ---- parse / serialize -------------------------------------------------------------------------

def _field_of(exc: msgspec.ValidationError) -> str:
    text = str(exc)
    at = _AT.search(text)
    path = at.group("path") if at else ""
    named = _MISSING.match(text)
    if named:
        path = f"{path}.{named.group('name')}"
    return path.lstrip(".")


def _problem_of(exc: msgspec.ValidationError) -> str:
    return _AT.sub("", str(exc))


def _unicode_problem(value: Any) -> str | None:
    """The dotted path of the first string (or key) in a plain JSON value holding a lone
    surrogate, or ``None``. Iterative: the value may be nested deeper than the recursion limit."""
    stack: list[tuple[Any, str]] = [(value, "")]
    while stack:
        node, where = stack.pop()
        if isinstance(node, str):
            if not node.isascii() and _LONE_SURROGATE.search(node) is not None:
                return where
        elif isinstance(node, Mapping):
            for key, item in node.items():
                name = str(key)
                if not name.isascii() and _LONE_SURROGATE.search(name) is not None:
                    return where or "(a key)"
                stack.append((item, f"{where}.{name}" if where else name))
        elif isinstance(node, (list, tuple)):
            stack.extend((item, f"{where}[{i}]") for i, item in enumerate(node))
    return None


def _refuse_lone_surrogates(cp: LoopCheckpoint) -> None:
    # A str with a lone surrogate is not Unicode: it converts, and then cannot be written. Try the
    # encode (fast); only when it fails is the value walked to name the field.
    try:
        _ENCODER.encode(cp)
    except UnicodeEncodeError:
        where = _unicode_problem(msgspec.to_builtins(cp)) or ""
        raise CheckpointFormatError(
            where, "text holds a lone surrogate (not valid Unicode, so not storable)") from None


def parse_loop_checkpoint(value: object, *, max_bytes: int | None = None,
                          execution_id: str | None = None) -> LoopCheckpoint:
    """Read a stored checkpoint: the parsed JSON value (a dict) or the JSON text/bytes themselves.

    Validates strictly: an unknown ``version`` raises :class:`UnsupportedCheckpointVersionError`;
    a wrong shape or type, an unknown field, an impossible state, text that is not valid Unicode
    (a lone surrogate) or nesting deeper than the interpreter can follow raises
    :class:`CheckpointFormatError` naming the field. The result passes :func:`check_invariants`.

    Cost: loading takes memory of roughly 15x the stored size (a 38 MB transcript costs about
    0.6 GB while it is read), so a host reading untrusted storage sets ``max_bytes``: longer text
    or bytes are refused before decoding (a dict, already in memory, is not measured).

    ``execution_id``: the id the caller asked for. A store passes it, so a body whose own
    ``execution_id`` differs (a row copied under another key) raises :class:`CheckpointFormatError`
    instead of handing one conversation's checkpoint to another.
    """
    if max_bytes is not None and (isinstance(max_bytes, bool) or not isinstance(max_bytes, int)
                                  or max_bytes < 1):
        raise UsageError(f"max_bytes must be a positive int or None, got {max_bytes!r}")
    if isinstance(value, (bytes, bytearray, memoryview, str)):
        if isinstance(value, str):
            try:
                value = value.encode("utf-8")
            except UnicodeEncodeError as exc:
                raise CheckpointFormatError(
                    "", f"text holds a lone surrogate at offset {exc.start} (not valid Unicode)"
                ) from None
        size = value.nbytes if isinstance(value, memoryview) else len(value)
        if max_bytes is not None and size > max_bytes:
            raise CheckpointFormatError(
                "", f"{size} bytes is over the host's limit of max_bytes={max_bytes}")
        try:
            value = _JSON_DECODER.decode(value)
        except msgspec.DecodeError as exc:
            raise CheckpointFormatError("", f"not JSON: {exc}") from exc
        except RecursionError:
            raise CheckpointFormatError("", "nested too deeply to decode") from None
    else:
        # msgspec's convert raises a bare UnicodeEncodeError on a lone surrogate in some places
        # (a wrong-typed field): name the field first.
        where = _unicode_problem(value)
        if where is not None:
            raise CheckpointFormatError(
                where, "text holds a lone surrogate (not valid Unicode, so not storable)")
    if not isinstance(value, Mapping):
        raise CheckpointFormatError("", f"expected a JSON object, got {type(value).__name__}")
    if "version" not in value:
        raise CheckpointFormatError("version", "missing: is this a bindloop loop checkpoint?")
    version = value["version"]
    if isinstance(version, bool) or version not in _SUPPORTED:
        raise UnsupportedCheckpointVersionError(version, _SUPPORTED)
    try:
        cp = msgspec.convert(value, LoopCheckpoint, strict=True)
    except msgspec.ValidationError as exc:
        raise CheckpointFormatError(_field_of(exc), _problem_of(exc)) from exc
    except RecursionError:
        raise CheckpointFormatError("", "nested too deeply to read") from None
    check_invariants(cp)
    if execution_id is not None and cp.execution_id != execution_id:
        raise CheckpointFormatError(
            "execution_id", f"the stored body belongs to {cp.execution_id!r}, not to the "
            f"{execution_id!r} asked for (a row copied under another key?)")
    return _checked(msgspec.structs.replace(cp, stats=_plain_zero(cp.stats)))


def require_checkpoint(value: object, what: str = "checkpoint", *,
                       known: Sequence[Message] = (), bindings_copied: bool = False
                       ) -> LoopCheckpoint:
    """A clean copy of ``value`` if it is a :class:`LoopCheckpoint` that
    :func:`parse_loop_checkpoint` would accept (types and invariants), else
    :class:`CheckpointFormatError`. Rebuilding it through msgspec means a hand-built checkpoint
    cannot carry a wrong type (a dict where a message belongs, a list where a tuple does) into a run
    or into storage, and the copy shares nothing mutable with the caller's value.

    A message is validated once: one that *is* (by identity) the message at the same position of
    ``known`` (messages this function returned before: the previous checkpoint of the same run) or
    of a checkpoint this function or :func:`parse_loop_checkpoint` returned is taken as it is, the
    rest of the checkpoint checked as usual. A new message is checked and, when it equals its
    checked copy (the same type; which leaves only values nothing can change), kept itself, else
    replaced by the copy; so is each message of a checkpoint validated whole (nothing known), so
    the caller's next checkpoint of the same transcript knows them. A checkpoint this function or
    :func:`parse_loop_checkpoint` returned, passed again with the same field values, has only its
    mutable parts checked again: ``bindings`` and ``stats`` (whose ``tools`` is a dict). Whatever
    the path, what is accepted, what is refused and the error raised are those of validating the
    whole checkpoint.

    ``bindings_copied``: ``value.bindings`` is what :func:`copy_bindings` just returned, held by
    nobody else (a run's driver building its next checkpoint), so it is used as it is."""
    if not isinstance(value, LoopCheckpoint):
        raise CheckpointFormatError("", f"{what} must be a LoopCheckpoint, got {type(value).__name__}")
    # Copied before to_builtins, which turns a set into a list.
    bindings = value.bindings if bindings_copied else copy_bindings(value.bindings)
    messages = value.messages
    if type(messages) is tuple:
        try:
            if _fields_unchanged(value):
                return _checked(_with_mutable_parts_checked(value, bindings))
            # Nothing known is the same path with every message new: their JSON bytes read back
            # in one call cost less than rebuilding the whole checkpoint through builtins.
            known = _validated_messages(value) or known
            return _checked(_with_known_messages(value, messages, known, bindings))
        except _INCREMENTAL_REFUSALS:
            pass  # validating the whole checkpoint names the problem (or accepts it)
    return _checked(_validate_whole(value, what, bindings))


def _validate_whole(value: LoopCheckpoint, what: str, bindings: LoopBindings) -> LoopCheckpoint:
    try:
        clean = msgspec.convert(msgspec.to_builtins(value), LoopCheckpoint, strict=True)
    except msgspec.ValidationError as exc:
        raise CheckpointFormatError(_field_of(exc), _problem_of(exc)) from exc
    except (TypeError, OverflowError) as exc:
        raise CheckpointFormatError("", f"{what} holds a value JSON cannot carry: {exc}") from exc
    except RecursionError:
        raise CheckpointFormatError("", f"{what} is nested too deeply to store") from None
    _check_invariants(clean, bindings=False)
    # The given messages equal to their checked copies are kept as themselves, so the caller's
    # next checkpoint of the same transcript (a chat's next save) finds them known.
    messages = value.messages
    kept = (tuple(map(_kept, messages, clean.messages))
            if isinstance(messages, (tuple, list)) and len(messages) == len(clean.messages)
            else clean.messages)
    clean = msgspec.structs.replace(clean, messages=kept, bindings=bindings,
                                    stats=_plain_zero(clean.stats))
    _refuse_lone_surrogates(clean)
    return clean


# What makes the incremental path hand over to _validate_whole, which names the problem.
_INCREMENTAL_REFUSALS: Final = (CheckpointFormatError, msgspec.DecodeError, TypeError,
                                OverflowError, RecursionError, UnicodeEncodeError)


def _with_known_messages(value: LoopCheckpoint, messages: tuple[Any, ...],
                         known: Sequence[Message], bindings: LoopBindings) -> LoopCheckpoint:
    """``value`` validated like :func:`_validate_whole` does, except the messages that are
    ``known`` at their position. Raises one of ``_INCREMENTAL_REFUSALS`` for anything the whole
    validation would refuse (and possibly for some it accepts: it then decides)."""
    # Everything but the messages, through msgspec as a whole: its JSON bytes (a lone surrogate,
    # the bindings' keys and strings included, raises UnicodeEncodeError) read back strictly.
    # The bindings are the copy already made and checked: the decoded ones are dropped.
    head = _CHECKPOINT_DECODER.decode(_ENCODER.encode(
        msgspec.structs.replace(value, messages=(), bindings=bindings)))
    fresh = _fresh_positions(messages, known)
    clean_messages = messages
    if fresh:
        batch = (messages[fresh.start:fresh.stop] if isinstance(fresh, range)
                 else tuple(messages[k] for k in fresh))
        checked = _convert_messages(batch)
        if not all(map(_same, batch, checked)):
            out = list(messages)
            for k, m, clean in zip(fresh, batch, checked):
                if not _same(m, clean):
                    out[k] = clean
            clean_messages = tuple(out)
    cp = msgspec.structs.replace(head, messages=clean_messages, bindings=bindings,
                                 stats=_plain_zero(head.stats))
    _check_invariants(cp, bindings=False)
    return cp


def _convert_messages(batch: tuple[Any, ...]) -> tuple[Message, ...]:
    """``batch`` strictly converted to messages, through their JSON bytes (so a lone surrogate
    raises ``UnicodeEncodeError`` and a value that is not JSON ``TypeError``). The one place the
    incremental path checks messages."""
    checked: tuple[Message, ...] = _MESSAGES_DECODER.decode(_ENCODER.encode(batch))
    return checked


def _with_mutable_parts_checked(value: LoopCheckpoint, bindings: LoopBindings) -> LoopCheckpoint:
    """A checkpoint validated before, every field still the value it was then: what can have
    changed since is inside its dicts (``bindings``, already copied, and ``stats.tools``)."""
    stats = msgspec.convert(msgspec.to_builtins(value.stats), RunStats, strict=True)
    _check_stats(stats, "stats")
    clean = msgspec.structs.replace(value, bindings=bindings, stats=_plain_zero(stats))
    _ENCODER.encode(msgspec.structs.replace(clean, messages=()))  # a lone surrogate in the dicts
    return clean


def _fresh_positions(messages: tuple[Any, ...], known: Sequence[Message]) -> Sequence[int]:
    """The positions of ``messages`` that do not hold the very object ``known`` holds there, or
    -- when ``known`` stands whole a few messages in (a system prompt put before a stored
    transcript) -- the positions outside it. A message validated is valid wherever it stands:
    what relates messages to each other is checked over the whole checkpoint either way."""
    if known is messages:
        return ()
    n = len(known)
    # The usual case, a transcript that only grew: one identity comparison a message, in C.
    if len(messages) >= n and all(map(is_, messages, known)):
        return range(n, len(messages))
    if n:
        first = known[0]
        for at in range(1, min(_KNOWN_OFFSET, len(messages) - n) + 1):
            if messages[at] is first and all(map(is_, messages[at:at + n], known)):
                return [*range(at), *range(at + n, len(messages))]
    return [k for k, m in enumerate(messages) if k >= n or m is not known[k]]


def _same(given: Any, clean: Any) -> bool:
    """Whether a message that validated as ``clean`` may be kept as the very object ``given``:
    the same type and equal to its strictly converted copy. The message Structs are frozen and
    hold no dict and no float, so equality leaves only what nothing can change and what encodes
    to the same bytes (a list where a tuple belongs, which the constructors accept, is not equal
    to the tuple: such a message is copied). Equality runs in C: a few times cheaper than walking
    the message."""
    return type(given) is type(clean) and given == clean


def _kept(given: Any, clean: Any) -> Any:
    return given if _same(given, clean) else clean


def _validated_messages(cp: LoopCheckpoint) -> Sequence[Message]:
    """``cp``'s messages if this module validated them (its mark holds that very tuple), else
    none: only such messages may be taken as known."""
    mark = cp.__dict__.get(_CHECKED)
    return cp.messages if mark is not None and mark[_MESSAGES_AT] is cp.messages else ()


def _checked(cp: LoopCheckpoint) -> LoopCheckpoint:
    """Mark ``cp``, just validated (its messages and every field but its dicts immutable), with its
    field values and its stats' bytes, so passing it again checks only what can have changed."""
    marks = cp.__dict__
    marks[_CHECKED] = msgspec.structs.astuple(cp)
    marks[_CHECKED_STATS] = _ENCODER.encode(cp.stats)
    return cp


def _fields_unchanged(cp: LoopCheckpoint) -> bool:
    """Whether ``cp`` carries this module's mark and every field is still the very value it was
    when it was validated (what can have changed since is inside its dicts)."""
    fields = cp.__dict__.get(_CHECKED)
    return fields is not None and all(map(is_, msgspec.structs.astuple(cp), fields))


def _unchanged_bytes(cp: LoopCheckpoint) -> bytes | None:
    """The JSON bytes of ``cp`` when nothing can have made it invalid since it was validated: every
    field the very value it was then, its stats (whose ``tools`` is a dict) encoding to the bytes
    they did then, and its bindings plain JSON values (what :func:`json_copy` copies without a
    question), written as their copy is. ``None`` otherwise, or when ``cp`` cannot be encoded:
    the caller validates it."""
    if not _fields_unchanged(cp):
        return None
    bindings = cp.bindings
    try:
        if (_ENCODER.encode(cp.stats) != cp.__dict__.get(_CHECKED_STATS)
                or type(bindings.config) is not dict or type(bindings.environment) is not dict):
            return None
        # The copy, as copy_bindings makes it: -0.0 written as 0.0, a tuple as a list.
        plain = LoopBindings(config=_plain_copy(bindings.config, 0),
                             environment=_plain_copy(bindings.environment, 0))
        return _ENCODER.encode(msgspec.structs.replace(cp, bindings=plain))
    except (_NotPlain, *_INCREMENTAL_REFUSALS):
        return None


def validate_loop_checkpoint(checkpoint: LoopCheckpoint, *,
                             previous: LoopCheckpoint | None = None) -> LoopCheckpoint:
    """``checkpoint`` as :func:`serialize_loop_checkpoint` would store it -- an equal copy that
    shares nothing mutable with it -- or :class:`CheckpointFormatError` for one
    :func:`parse_loop_checkpoint` would refuse.

    ``previous`` is for a host that builds a checkpoint at every turn of one execution: pass the
    checkpoint this function returned the turn before, and the messages ``checkpoint`` shares
    with it (the same objects at the same positions, or all of them in order a few messages in,
    after a leading system prompt) are not checked again, so each call costs what the turn added
    rather than the whole transcript. A ``previous`` this package did not
    return, or one whose messages were swapped since, is ignored (everything is checked). Passing
    the result to a store's save or :func:`serialize_loop_checkpoint` checks only its mutable
    parts (``bindings``, ``stats.tools``) again."""
    if previous is not None and not isinstance(previous, LoopCheckpoint):
        raise CheckpointFormatError(
            "", f"previous must be a LoopCheckpoint, got {type(previous).__name__}")
    return require_checkpoint(
        checkpoint, known=() if previous is None else _validated_messages(previous))


def serialize_loop_checkpoint(checkpoint: LoopCheckpoint) -> bytes:
    """The checkpoint's JSON bytes: equal checkpoints give equal bytes (Struct fields in declaration
    order, dict keys sorted, every checkpoint field written). Refuses a checkpoint
    :func:`parse_loop_checkpoint` would refuse, so storage never holds one that cannot be read back.

    A checkpoint a run committed (or :func:`parse_loop_checkpoint` read, or
    :func:`validate_loop_checkpoint` returned) was validated then: when every field is still the
    value it was, its stats still encode to the bytes they did and its bindings hold plain JSON
    values, nothing can have made it invalid and it is encoded without checking it again.
    Otherwise its messages validated then are not checked again; the rest of it is."""
    if isinstance(checkpoint, LoopCheckpoint):
        raw = _unchanged_bytes(checkpoint)
        if raw is not None:
            return raw
    return _ENCODER.encode(require_checkpoint(checkpoint))
