"""What both protocol encoders share: the run-event state machine (:class:`RunEncoder`), the tool
calls a turn is streaming and the run's tokens."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable
from functools import reduce
from typing import Generic, TypeAlias, TypeVar

from ..completion import (
    fold_usage,
    ErrorEvent,
    ExtraEvent,
    FinishEvent,
    FinishReason,
    ReasoningEvent,
    TextEvent,
    ToolCallChunk,
    ToolCallEvent,
    UsageEvent,
)
from ..textstream import TurnResetEvent, TurnTextEvent
from ..contracts import ToolCall, TurnUsage, add_usage
from ..errors import ProtocolError
from ._input import (
    ApprovalDecidedEvent,
    ApprovalRequestedEvent,
    CheckpointSavedEvent,
    EncoderInput,
    ToolCallDoneEvent,
    ToolFinishedEvent,
    ToolStartedEvent,
    TurnDoneEvent,
    TurnFailedEvent,
    TurnStartEvent,
)

__all__ = ("CallSlot", "CallOutput", "RunEncoder", "UsageLedger")

CallOutput: TypeAlias = ToolFinishedEvent | ApprovalRequestedEvent | ApprovalDecidedEvent
"""What a client is told about a complete call: its outcome, an approval asked for, a denial."""


class CallSlot:
    """One streamed tool call of a turn, keyed by the provider's index: the id may arrive late and
    the name in fragments, so it is announced once both are known; argument text seen before that
    waits in ``args`` and goes out with the announcement."""

    __slots__ = ("args", "id", "name", "started")

    def __init__(self) -> None:
        self.id: str | None = None
        self.name = ""
        self.args: list[str] = []
        self.started = False

    def take(self, chunk: ToolCallChunk) -> bool:
        """Merge ``chunk``; ``True`` when the call can be announced now (for the first time)."""
        if chunk.id:
            self.id = chunk.id
        if chunk.name:
            self.name += chunk.name
        if chunk.arguments:
            self.args.append(chunk.arguments)
        if not self.started and self.id is not None and self.name:
            self.started = True
            return True
        return False

    def pending_args(self) -> str | None:
        """Argument text to send now (once announced), or ``None``."""
        if not self.started or not self.args:
            return None
        text = "".join(self.args)
        self.args = []
        return text


class UsageLedger:
    """Each turn's usage reports folded as the turn's own fold folds them
    (:func:`~bindloop.completion.fold_usage`, or the last one for a ``snapshot``), summed over the
    run's turns with :func:`~bindloop.contracts.add_usage`: every detail kept (cache reads and
    writes, reasoning)."""

    __slots__ = ("_turns",)

    def __init__(self) -> None:
        self._turns: dict[int, TurnUsage] = {}

    def record(self, turn: int, usage: TurnUsage, snapshot: bool = False) -> None:
        prev = self._turns.get(turn)
        self._turns[turn] = usage if prev is None or snapshot else fold_usage(prev, usage)

    def total(self) -> TurnUsage:
        return reduce(add_usage, self._turns.values(), TurnUsage())


Out = TypeVar("Out")


class RunEncoder(ABC, Generic[Out]):
    """The state machine both protocol encoders share: the run's edges, one step per model turn,
    at most one open text part and one open reasoning part, tool calls announced once their id and
    name are known, tool outputs held until their call is complete, usage folded per turn.

    A subclass says how each of these looks on its wire, through the ``_on_*`` hooks (each appends
    its chunks to ``out``), and implements the run's end (``finish`` etc.) with :meth:`_end`.
    Part ids are ``<id_prefix>-<kind><n>``: equal events give equal ids.
    ``known_calls``: calls the client already holds complete (from the request), whose outputs
    need no announcement."""

    _name = "encoder"

    def __init__(self, id_prefix: str, known_calls: Iterable[str] = ()) -> None:
        self._id_prefix = id_prefix
        self._step: int | None = None
        self._next_turn = 0
        self._text: str | None = None
        self._reasoning: str | None = None
        self._reasoning_index = -1
        self._calls: dict[tuple[int, int], CallSlot] = {}
        self._complete: set[str] = set(known_calls)
        self._held: dict[str, list[CallOutput]] = {}
        self._usage = UsageLedger()
        self._turn_finish: FinishReason | None = None
        self._restart_turn: int | None = None
        self._restarts = 0
        self._counter = 0
        self._started = False
        self.done = False

    def usage(self) -> TurnUsage:
        """The run's tokens so far: each turn's usage folded, summed over turns."""
        return self._usage.total()

    # -- what a subclass says (each appends its wire's chunks to ``out``) ---------------------

    @abstractmethod
    def _on_step_start(self, turn: int, out: list[Out]) -> None:
        """A model turn's step opens."""

    @abstractmethod
    def _on_step_end(self, turn: int, out: list[Out]) -> None:
        """The step closes (its parts are closed already)."""

    @abstractmethod
    def _on_text_start(self, out: list[Out]) -> str:
        """A text part opens; returns its id."""

    @abstractmethod
    def _on_text(self, part_id: str, text: str, out: list[Out]) -> None:
        """A fragment of the open text part."""

    @abstractmethod
    def _on_text_end(self, part_id: str, out: list[Out]) -> None:
        """The text part closes."""

    @abstractmethod
    def _on_reasoning_start(self, part_id: str, out: list[Out]) -> None:
        """A reasoning part opens under ``part_id``."""

    @abstractmethod
    def _on_reasoning(self, part_id: str, text: str, out: list[Out]) -> None:
        """A fragment of the open reasoning part."""

    @abstractmethod
    def _on_reasoning_end(self, part_id: str, out: list[Out]) -> None:
        """The reasoning part closes."""

    @abstractmethod
    def _on_call_start(self, call_id: str, name: str, out: list[Out]) -> None:
        """A streamed tool call is announced (its id and name are known)."""

    @abstractmethod
    def _on_call_args(self, call_id: str, args: str, out: list[Out]) -> None:
        """A fragment of an announced call's arguments."""

    @abstractmethod
    def _on_call_done(self, call: ToolCall, streamed: bool, out: list[Out]) -> None:
        """The call is complete; ``streamed``: it was announced before (else this is its first sight)."""

    @abstractmethod
    def _on_output(self, event: CallOutput, out: list[Out]) -> None:
        """What a complete call came to: a tool's outcome (never ``None``: a fatal raise is the
        run's failure, told by its end), an approval request, or a denial."""

    @abstractmethod
    def _on_call_abandoned(self, call_id: str, name: str, out: list[Out]) -> None:
        """An announced call will never complete: the attempt streaming it lost the turn."""

    @abstractmethod
    def _on_reset(self, event: TurnResetEvent, out: list[Out]) -> None:
        """The turn text stream retracted the attempt's text."""

    @abstractmethod
    def _on_other(self, turn: int, event: EncoderInput, out: list[Out]) -> None:
        """Structured data, application data, state."""

    # -- the machine ----------------------------------------------------------------------------

    def _begin(self) -> None:
        if self._started:
            raise ProtocolError(f"{self._name}.start() was already called")
        self._started = True

    def _end(self) -> list[Out]:
        """Open parts closed, outputs still held sent rather than lost, the last step ended."""
        out: list[Out] = []
        for call_id in list(self._held):
            for held in self._held.pop(call_id):
                self._on_output(held, out)
        self._end_step(out)
        self.done = True
        return out

    def _next_id(self, kind: str) -> str:
        """A part id unique in this run: ``<id_prefix>-<kind><n>``."""
        self._counter += 1
        return f"{self._id_prefix}-{kind}{self._counter}"

    def feed(self, event: EncoderInput, *, turn_index: int | None = None) -> list[Out]:
        """The chunks for one event. ``turn_index`` (from :func:`agent_event_input`) opens a new
        step when it moves on; host facts (tool outputs, data, state) may leave it ``None``."""
        if not self._started or self.done:
            raise ProtocolError(f"{self._name}.feed() needs start() first and nothing after the "
                                "run's end")
        out: list[Out] = []
        if isinstance(event, TurnStartEvent):
            turn = self._next_turn if turn_index is None else turn_index
            if turn == self._step:
                self._restart(turn, out)  # the turn starts again: a reset
            else:
                self._open_step(turn, out)
            return out
        if turn_index is not None and (self._step is None or turn_index > self._step):
            self._open_step(turn_index, out)
        turn = self._step if self._step is not None else 0
        if isinstance(event, (TextEvent, TurnTextEvent)):
            text = event.content if isinstance(event, TextEvent) else event.text
            if text:
                self._text_delta(text, out)
        elif isinstance(event, ReasoningEvent):
            self._reasoning_delta(event, out)
        elif isinstance(event, ToolCallEvent):
            self._tool_chunk(turn, event, out)
        elif isinstance(event, ToolCallDoneEvent):
            self._tool_done(turn, event.tool_call, out)
        elif isinstance(event, UsageEvent):
            self._usage.record(turn, event.usage, event.snapshot)
        elif isinstance(event, (FinishEvent, TurnDoneEvent)):
            self._turn_finish = event.finish_reason
            if isinstance(event, FinishEvent) and event.usage is not None:
                self._usage.record(turn, event.usage)
            self._close_parts(out)
        elif isinstance(event, (ToolFinishedEvent, ApprovalRequestedEvent,
                                ApprovalDecidedEvent)):
            if isinstance(event, ToolFinishedEvent):
                if event.outcome is None:
                    return out  # a fatal raise: the run fails, and its end says so
                call_id = event.call.id
            elif isinstance(event, ApprovalDecidedEvent) and event.approved:
                return out  # the call runs now: its outcome is what the client is told
            else:
                call_id = event.call_id
            if call_id in self._complete:
                self._on_output(event, out)
            else:
                self._held.setdefault(call_id, []).append(event)
        elif isinstance(event, (ToolStartedEvent, CheckpointSavedEvent)):
            pass  # a call running and a save are nothing these protocols show
        elif isinstance(event, TurnResetEvent):
            self._on_reset(event, out)
        elif isinstance(event, TurnFailedEvent):
            # A failed turn may be retried (a re-ask, create_retry_middleware); the run's own end
            # says whether it failed, so here only the turn's open parts are closed.
            self._close_parts(out)
        elif not isinstance(event, (ExtraEvent, ErrorEvent)):  # nothing a UI shows
            self._on_other(turn, event, out)
        return out

    def _restart(self, turn: int, out: list[Out]) -> None:
        """A second ``turn_start`` of the open step: another attempt (a route's fallback) took the
        turn over after its events were fed. What it showed is retracted as a turn text stream's
        reset would be (``attempt_failed``, epoch = the turn's restarts so far); its announced calls
        not yet complete are closed as abandoned and forgotten, so the new attempt's fragments start
        afresh."""
        self._restarts = restarts = self._restarts + 1 if self._restart_turn == turn else 1
        self._restart_turn = turn
        self._on_reset(TurnResetEvent(turn_id=f"{self._id_prefix}-turn{turn}", epoch=restarts,
                                      seq=0, reason="attempt_failed"), out)
        self._close_parts(out)
        for key, call in list(self._calls.items()):
            if key[0] == turn and call.id not in self._complete:
                if call.started:
                    self._on_call_abandoned(call.id or "", call.name, out)
                del self._calls[key]

    def _open_step(self, turn: int, out: list[Out]) -> None:
        if self._step is not None and self._step == turn:
            return
        self._end_step(out)
        self._step = turn
        self._next_turn = turn + 1
        self._turn_finish = None
        self._on_step_start(turn, out)

    def _end_step(self, out: list[Out]) -> None:
        self._close_parts(out)
        if self._step is not None:
            self._on_step_end(self._step, out)
            self._step = None

    def _ensure_step(self, out: list[Out]) -> None:
        if self._step is None:
            self._open_step(self._next_turn, out)

    def _close_text(self, out: list[Out]) -> None:
        if self._text is not None:
            self._on_text_end(self._text, out)
            self._text = None

    def _close_reasoning(self, out: list[Out]) -> None:
        if self._reasoning is not None:
            self._on_reasoning_end(self._reasoning, out)
            self._reasoning = None

    def _close_parts(self, out: list[Out]) -> None:
        self._close_text(out)
        self._close_reasoning(out)

    def _text_delta(self, text: str, out: list[Out]) -> None:
        self._ensure_step(out)
        self._close_reasoning(out)
        if self._text is None:
            self._text = self._on_text_start(out)
        self._on_text(self._text, text, out)

    def _reasoning_delta(self, event: ReasoningEvent, out: list[Out]) -> None:
        self._ensure_step(out)
        self._close_text(out)
        if self._reasoning is not None and event.index != self._reasoning_index:
            self._close_reasoning(out)
        if not event.part.text:
            return  # provenance alone (a signature) is nothing to show
        if self._reasoning is None:
            self._reasoning = self._next_id("reasoning")
            self._reasoning_index = event.index
            self._on_reasoning_start(self._reasoning, out)
        self._on_reasoning(self._reasoning, event.part.text, out)

    def _tool_chunk(self, turn: int, event: ToolCallEvent, out: list[Out]) -> None:
        call = self._calls.setdefault((turn, event.tool_call.index), CallSlot())
        announce = call.take(event.tool_call)
        if call.id in self._complete:
            call.args = []  # a fragment of a call already complete: nothing may follow its end
            return
        if announce:
            self._ensure_step(out)
            self._close_parts(out)
            self._on_call_start(call.id or "", call.name, out)
        args = call.pending_args()
        if args is not None:
            self._on_call_args(call.id or "", args, out)

    def _tool_done(self, turn: int, tc: ToolCall, out: list[Out]) -> None:
        if tc.id in self._complete:
            return  # the same call reported twice
        self._ensure_step(out)
        streamed = any(c.started and c.id == tc.id for (t, _), c in self._calls.items()
                       if t == turn)
        if not streamed:
            self._close_parts(out)
        self._on_call_done(tc, streamed, out)
        self._complete.add(tc.id)
        for held in self._held.pop(tc.id, ()):
            self._on_output(held, out)

    def _unfinished_calls(self) -> list[str]:
        """Calls announced but never completed (the turn ended first)."""
        return [c.id for c in self._calls.values()
                if c.started and c.id is not None and c.id not in self._complete]
