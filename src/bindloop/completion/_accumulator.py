"""Assembling streamed tool calls from indexed deltas.

The obvious accumulation loop is wrong in four ways that all fail silently: it keys by arrival order
(index 1 can arrive before index 0, which transposes two calls that both still parse), reads the id
only from a slot's first delta (a late id is legal, and a call without one cannot be answered),
assigns the name instead of concatenating it (``"_file"`` from ``"read" + "_file"``, which surfaces as
an unknown tool the model never asked for), and forgets to sort by index at the end.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeAlias

from ..contracts import ToolCall, openai_tool_call_fields  # the one reader of that dict shape
from ._events import ToolCallChunk
from ._errors import ToolCallDeltaError

__all__ = (
    "ToolCallAccumulator",
    "ToolCallDelta",
    "create_tool_call_accumulator",
    "finished_call",
    "plain_chunk",
)

ToolCallDelta: TypeAlias = ToolCallChunk | Mapping[str, Any]
"""A :class:`ToolCallChunk`, or an OpenAI wire delta ``{"index", "id", "function": {"name",
"arguments"}}`` (a flat ``{"index", "id", "name", "arguments"}`` dict is read too)."""


class _Slot:
    __slots__ = ("arguments", "id", "name")

    def __init__(self) -> None:
        self.id: str | None = None
        self.name: list[str] = []
        self.arguments: list[str] = []


def _fragment(value: object, field: str, index: int) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise ToolCallDeltaError(
        f"tool-call delta at index {index}: {field} must be a string fragment, got "
        f"{type(value).__name__}"
    )


def plain_chunk(delta: object) -> bool:
    """Whether ``delta`` is a :class:`ToolCallChunk` whose fields need no further check: a
    non-negative int index, ``str`` or ``None`` fragments."""
    if type(delta) is not ToolCallChunk:
        return False
    index, call_id, name, arguments = delta.index, delta.id, delta.name, delta.arguments
    return (type(index) is int and index >= 0 and (call_id is None or type(call_id) is str)
            and (name is None or type(name) is str)
            and (arguments is None or type(arguments) is str))


def finished_call(index: int, call_id: str | None, name: str, arguments: str,
                  mint_id: Callable[[int], str] | None) -> ToolCall:
    """The call of the slot at ``index`` once its stream ended: ``call_id`` (``None``: none came)
    or ``mint_id(index)``, and a name; else :class:`ToolCallDeltaError`."""
    if call_id is None:
        if mint_id is None:
            raise ToolCallDeltaError(
                f"the tool call at index {index} ended without an id, so its result could "
                "not be paired with it; pass mint_id= for providers that omit ids"
            )
        call_id = mint_id(index)
    if not name:
        raise ToolCallDeltaError(f"the tool call at index {index} ended without a name")
    return ToolCall(id=call_id, name=name, arguments=arguments)


class ToolCallAccumulator:
    """Merges tool-call deltas by the provider's index; build one per model attempt.

    ``observe`` may be called with anything a chunk's ``tool_calls`` field holds (``None``, one delta
    or a list of them). ``assembled()`` can be called at any time and does not consume the state.
    """

    __slots__ = ("_mint_id", "_slots")

    def __init__(self, *, mint_id: Callable[[int], str] | None = None) -> None:
        self._slots: dict[int, _Slot] = {}
        self._mint_id = mint_id

    @property
    def is_empty(self) -> bool:
        """No tool-call delta has been observed."""
        return not self._slots

    def __len__(self) -> int:
        return len(self._slots)

    def observe(self, deltas: ToolCallDelta | Iterable[ToolCallDelta] | None) -> None:
        """Merge ``deltas`` into their slots.

        Raises :class:`ToolCallDeltaError` for a delta without a non-negative integer ``index`` or
        whose ``id`` contradicts the slot's; the slots already merged are kept.
        """
        if plain_chunk(deltas):  # the common delta: its fields need no further check
            chunk: ToolCallChunk = deltas  # type: ignore[assignment]
            self._place(chunk.index, chunk.id, chunk.name, chunk.arguments)
            return
        if deltas is None:
            return
        if isinstance(deltas, (ToolCallChunk, Mapping)):
            self._merge(deltas)
            return
        for delta in deltas:
            self._merge(delta)

    def _merge(self, delta: ToolCallDelta) -> None:
        if isinstance(delta, ToolCallChunk):
            index: object = delta.index
            call_id: object = delta.id
            name: object = delta.name
            arguments: object = delta.arguments
        elif isinstance(delta, Mapping):
            index, call_id, name, arguments = openai_tool_call_fields(delta)
        else:
            raise ToolCallDeltaError(
                f"a tool-call delta must be a ToolCallChunk or a mapping, got {type(delta).__name__}"
            )
        # bool is an int subclass; True as an index is a provider bug, not slot 1.
        if not isinstance(index, int) or isinstance(index, bool) or index < 0:
            raise ToolCallDeltaError(
                f"tool-call delta has no usable index (got {index!r}); deltas are merged by index, "
                "so one without it cannot be placed"
            )
        self._place(index, _fragment(call_id, "id", index), _fragment(name, "name", index),
                    _fragment(arguments, "arguments", index))

    def _place(self, index: int, call_id: str | None, name: str | None,
               arguments: str | None) -> None:
        # One checked delta into its slot.
        slot = self._slots.get(index)
        if slot is None:
            slot = self._slots[index] = _Slot()
        if call_id:  # some providers send "" on continuation deltas
            if slot.id is None:
                slot.id = call_id
            elif slot.id != call_id:
                raise ToolCallDeltaError(
                    f"tool-call deltas at index {index} carry two ids ({slot.id!r} and {call_id!r}); "
                    "merging them would fuse two different calls"
                )
        if name:
            slot.name.append(name)
        if arguments:
            slot.arguments.append(arguments)

    def assembled(self) -> tuple[ToolCall, ...]:
        """The calls, ordered by index (gaps in the index sequence are fine).

        ``arguments`` is the concatenated raw text (possibly ``""``; read it with
        :func:`parse_tool_call_arguments`). A slot that never received an id gets ``mint_id(index)``
        when the accumulator was given one; otherwise, like a slot with no name, it raises
        :class:`ToolCallDeltaError`.
        """
        slots = self._slots
        return tuple(finished_call(index, slots[index].id, "".join(slots[index].name),
                                   "".join(slots[index].arguments), self._mint_id)
                     for index in sorted(slots))


def create_tool_call_accumulator(
    *, mint_id: Callable[[int], str] | None = None
) -> ToolCallAccumulator:
    """A fresh :class:`ToolCallAccumulator`. ``mint_id(index)`` supplies an id for a call the
    provider streamed without one (some providers never send ids); it must be unique per turn."""
    return ToolCallAccumulator(mint_id=mint_id)
