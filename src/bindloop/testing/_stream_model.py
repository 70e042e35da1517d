"""``scripted_stream_model``: a :class:`~bindloop.model.Model` that streams prepared turns as
events and records every request it got."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Generator, Iterator, Sequence
from typing import Any, Literal

from ..completion import (
    FinishEvent,
    ProviderItemEvent,
    ReasoningEvent,
    StreamEvent,
    TextEvent,
    ToolCallChunk,
    ToolCallEvent,
    UsageEvent,
)
from ..contracts import Message, ModelTurnResult, TurnUsage
from ..errors import UsageError
from ..model import ModelRequest, StreamModel
from ._script import ScriptedModel
from ._errors import ScriptExhaustedError

__all__ = ("ScriptedStreamModel", "StreamRequest", "scripted_stream_model")


class StreamRequest:
    """One recorded request: the messages it was shown (a copy, as a tuple) and the request it
    was sent. Read-only; equal when both are equal.

    A :class:`ScriptedStreamModel` records a call without copying what it was shown before: it
    keeps one list of the messages it saw, extended by each call's new ones, and a request is
    that list's first ``n`` (``messages`` is built on first read). So a test's model call costs
    time in the messages it adds, not in the whole transcript."""

    __slots__ = ("_count", "_log", "_messages", "_request")

    def __init__(self, *, messages: Sequence[Message], request: ModelRequest) -> None:
        self._messages: tuple[Message, ...] | None = tuple(messages)
        self._log: list[Message] = []
        self._count = 0
        self._request = request

    @classmethod
    def _logged(cls, log: list[Message], count: int, request: ModelRequest) -> StreamRequest:
        """The request shown ``log[:count]`` (``log`` only ever grows at its end)."""
        out = cls.__new__(cls)
        out._messages, out._log, out._count, out._request = None, log, count, request
        return out

    @property
    def messages(self) -> tuple[Message, ...]:
        kept = self._messages
        if kept is None:
            kept = self._messages = tuple(self._log[:self._count])
            self._log = []
        return kept

    @property
    def request(self) -> ModelRequest:
        return self._request

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, StreamRequest):
            return NotImplemented
        return self.messages == other.messages and self._request == other._request

    def __hash__(self) -> int:
        return hash((self.messages, self._request))

    def __repr__(self) -> str:
        return f"StreamRequest(messages={self.messages!r}, request={self._request!r})"


class _EventsAtHand:
    """One call's stream: an async iterator over ``events`` that is also an iterable of them, so
    ``fold_events`` folds it without an await per event. ``events`` is read once, whichever way;
    ``aclose`` closes it."""

    __slots__ = ("_events",)

    def __init__(self, events: Generator[StreamEvent, None, None]) -> None:
        self._events = events

    def __iter__(self) -> Iterator[StreamEvent]:
        return self._events

    def __aiter__(self) -> _EventsAtHand:
        return self

    async def __anext__(self) -> StreamEvent:
        for event in self._events:
            return event
        raise StopAsyncIteration

    async def aclose(self) -> None:
        self._events.close()


class ScriptedStreamModel(StreamModel):
    """Streams ``turns`` in order, one per ``stream`` call, as the events a provider sends (text in
    ``chunk_size``-character fragments, so partial-JSON consumers see real partial states).

    A script entry that is an exception is raised by that call instead (a provider failure before
    any output). ``requests`` records every call, failed ones included. ``price`` (``usage -> int``)
    is the model's optional price: :meth:`complete` (:class:`~bindloop.model.StreamModel`'s) folds
    the stream with it, so each turn's ``cost`` is ``price(usage)`` (0 without one).
    ``structured_output`` is the mode this model advertises (``"json_schema"``: native JSON-schema
    mode; ``"tool"``: the agent must use a forced output tool). More calls than turns raise
    :class:`~bindloop.testing.ScriptExhaustedError`.
    """

    def __init__(self, turns: Sequence[ModelTurnResult | BaseException], *, id: str = "scripted",
                 provider: str | None = "scripted",
                 structured_output: Literal["json_schema", "tool"] = "json_schema",
                 chunk_size: int = 8,
                 price: Callable[[TurnUsage], int] | None = None) -> None:
        if chunk_size < 1:
            raise UsageError(f"chunk_size must be at least 1, got {chunk_size}")
        # ScriptedModel mints missing tool-call ids and refuses duplicates: one rule for both kits.
        script = ScriptedModel([t for t in turns if isinstance(t, ModelTurnResult)])
        minted = iter(script.turns)
        self.turns: tuple[ModelTurnResult | BaseException, ...] = tuple(
            next(minted) if isinstance(t, ModelTurnResult) else t for t in turns)
        for t in self.turns:
            if not isinstance(t, (ModelTurnResult, BaseException)):
                raise UsageError(f"script entry {t!r} is neither a ModelTurnResult nor an exception")
        self.id = id
        self.provider = provider
        self.structured_output = structured_output
        self.position = 0
        self._requests: list[StreamRequest] = []
        self._log: list[Message] = []  # every message shown so far, in order (see StreamRequest)
        # The calls since requests was last read, as three columns: each call's log, how much of
        # it the call was shown and its request (made into StreamRequests when read).
        self._logs: list[list[Message]] = []
        self._counts: list[int] = []
        self._asked: list[ModelRequest] = []
        self._chunk = chunk_size
        if price is not None:  # an unpriced model's fold asks no price (StreamModel.complete)
            self.price = price  # type: ignore[method-assign]

    @property
    def remaining(self) -> int:
        return len(self.turns) - self.position

    @property
    def requests(self) -> list[StreamRequest]:
        """Every call's :class:`StreamRequest`, in call order, failed calls included: the same
        list at every read, the calls made since the last read appended to it then."""
        made = self._requests
        logs = self._logs
        if logs:
            made.extend(map(StreamRequest._logged, logs, self._counts, self._asked))
            logs.clear()
            self._counts.clear()
            self._asked.clear()
        return made

    def _record(self, messages: Sequence[Message], request: ModelRequest) -> None:
        """``request`` shown ``messages``: the log extended by the messages past its end when
        what it holds is still their start (the loop's transcript only grows between calls;
        the list comparison is one comparison of references a message, in C), else a new log
        (a compaction replaced the list's contents, a tuple, a copy)."""
        log = self._log
        seen = len(log)
        if type(messages) is not list or len(messages) < seen:
            log = self._log = list(messages)
        else:
            log.extend(messages[seen:])
            if messages != log:  # identical elements compare by address, without __eq__
                log = self._log = list(messages)
        self._logs.append(log)
        self._counts.append(len(log))
        self._asked.append(request)

    def stream(self, messages: Sequence[Message],
               request: ModelRequest, /) -> AsyncIterator[StreamEvent]:
        # The events are at hand: fold_events reads them without an await each.
        return _EventsAtHand(self._events(messages, request))

    def _events(self, messages: Sequence[Message],
                request: ModelRequest) -> Generator[StreamEvent, None, None]:
        """The call's events, recorded and taken from the script when first read (as a provider's
        stream starts when read)."""
        self._record(messages, request)
        position = self.position
        if position >= len(self.turns):
            raise ScriptExhaustedError(
                f"the scripted stream model was called {position + 1} times but the script "
                f"has {len(self.turns)} turns")
        entry = self.turns[position]
        self.position = position + 1
        if isinstance(entry, BaseException):
            raise entry
        # turn_events(entry), with its text in chunk_size fragments (empty parts skipped
        # without a loop: most turns are a tool call or an answer alone).
        if entry.reasoning:
            for index, part in enumerate(entry.reasoning):
                yield ReasoningEvent(part=part, index=index)
        if entry.provider_items:
            for index, item in enumerate(entry.provider_items):
                yield ProviderItemEvent(part=item, index=index)
        text = entry.text
        if text:
            n = self._chunk
            if len(text) > n:
                for i in range(0, len(text), n):
                    yield TextEvent(content=text[i:i + n])
            else:
                yield TextEvent(content=text)
        for index, call in enumerate(entry.tool_calls):
            yield ToolCallEvent(tool_call=ToolCallChunk(index=index, id=call.id, name=call.name,
                                                        arguments=call.arguments))
        yield UsageEvent(usage=entry.usage)
        yield FinishEvent(finish_reason=entry.finish_reason or "stop")  # type: ignore[arg-type]


def scripted_stream_model(turns: Sequence[ModelTurnResult | BaseException],
                          **options: Any) -> ScriptedStreamModel:
    """A :class:`ScriptedStreamModel` over ``turns`` (``final_answer`` / ``tool_call_turn``)."""
    return ScriptedStreamModel(turns, **options)
