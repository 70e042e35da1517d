"""Re-asks as a loop transition: the answer check behind the loop's ``on_turn_would_end``, and the
per-attempt turn bound checked before every model call.

A turn that would end the run (plain text, or the output tool's call in tool mode) is decoded
against the schema and shown to the generation's validators. Accepted, the run ends ``done`` with
that turn as its ``final_turn``; refused, the reason goes back as a user message and the same loop
goes on — a new attempt of ``max_turn_steps`` turns — until the agent's ``max_retries`` re-asks
are spent (:class:`~bindloop.errors.StructuredOutputError`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Final

from .._awaitable import resolve
from ..textstream import TurnTextStream
from ..contracts import Message, ModelTurnResult, UserMessage
from ..errors import PortContractError
from ._errors import StructuredOutputError, ToolLoopExceededError, TurnBudgetExceededError
from ._context import Frame, Generation
from ._saves import Position
from ..schema import InvalidOutputError, OutputSpec

__all__ = ("UNANSWERED", "Reasks", "answer_source", "validate")

UNANSWERED: Final[Any] = object()


def answer_source(turn: ModelTurnResult, output: str | None) -> str:
    """The answer a turn gives: the output tool's arguments in tool mode (``output`` names it),
    else its text."""
    if output is not None:
        for call in turn.tool_calls:
            if call.name == output:
                return call.arguments
    return turn.text or ""


def _check_validator_answer(verdict: object, validator: object) -> str | None:
    if verdict is True:
        return None
    if isinstance(verdict, str):
        return verdict or "the validator refused the answer"
    raise PortContractError(
        f"validator {getattr(validator, '__name__', validator)!r} returned {verdict!r}; a "
        "validator returns True to accept or an error string to re-ask")


async def validate(gen: Generation, value: Any) -> str | None:
    """The first validator's refusal of ``value`` (a raise counts as one), ``None`` when all accept."""
    for validator in gen.validators:
        try:
            verdict = await resolve(validator(value))
        except Exception as exc:  # a raising validator is a failed attempt, not a crash
            return f"validator raised {type(exc).__name__}: {exc}"
        reason = _check_validator_answer(verdict, validator)
        if reason is not None:
            return reason
    return None


class Reasks:
    """One prompt's answer check over its :class:`Position`. ``value`` is the accepted answer
    (decoded for a schema) once the run ends ``done``; ``chat`` says a checkpoint goes with
    running out of turns (a structured prompt cannot be resumed)."""

    __slots__ = ("chat", "frame", "gen", "on_reask", "output", "pos", "spec", "text", "value")

    def __init__(self, frame: Frame, gen: Generation, spec: OutputSpec | None, pos: Position, *,
                 output: str | None, text: TurnTextStream | None, chat: bool) -> None:
        self.frame = frame
        self.gen = gen
        self.spec = spec
        self.pos = pos
        self.output = output
        self.text = text
        self.chat = chat
        self.value: Any = UNANSWERED
        self.on_reask: Callable[[], None] | None = None  # a new attempt began

    def out_of_steps(self) -> ToolLoopExceededError:
        pos = self.pos
        return ToolLoopExceededError(
            f"agent {self.frame.agent_id!r}: {pos.steps} model turns without a final answer; "
            "raise max_turn_steps or check why the model keeps calling tools",
            max_turn_steps=pos.steps,
            checkpoint=pos.checkpoint("iteration_limit") if self.chat else None)

    def out_of_turns(self) -> TurnBudgetExceededError:
        total = self.pos.total_end
        return TurnBudgetExceededError(
            f"agent {self.frame.agent_id!r}: the prompt used all {total} model turns (tool steps "
            "and re-asks together) without an accepted answer; raise max_total_turns",
            max_total_turns=total)

    def __call__(self, turn: ModelTurnResult) -> list[Message] | None | Awaitable[
            list[Message] | None]:
        """The loop's ``on_turn_would_end``: ``None`` accepts ``turn``, a re-ask continues (an
        awaitable of the verdict when validators are equipped: they may be async)."""
        source = answer_source(turn, self.output)
        value: Any = source
        problem: str | None = None
        spec = self.spec
        if spec is not None:
            try:
                value = spec.decode(source)
            except InvalidOutputError as exc:
                problem = exc.reason
        if problem is None and self.gen.validators:
            return self._validated(source, value)
        return self._verdict(source, value, problem)

    async def _validated(self, source: str, value: Any) -> list[Message] | None:
        return self._verdict(source, value, await validate(self.gen, value))

    def _verdict(self, source: str, value: Any, problem: str | None) -> list[Message] | None:
        spec = self.spec
        if problem is None:
            self.value = value
            return None
        pos = self.pos
        pos.attempts.append((source, problem))
        frame = self.frame
        tracer = frame.run.tracer
        if tracer.enabled:
            tracer.event(frame.span, "bindloop.structured_output.retry",
                         {"bindloop.attempt": len(pos.attempts), "bindloop.reason": problem})
        if len(pos.attempts) > frame.max_retries:
            raise StructuredOutputError(
                f"agent {frame.agent_id!r}: no acceptable answer after {len(pos.attempts)} "
                f"attempts (max_retries={frame.max_retries}); last problem: {problem}",
                tuple(pos.attempts))
        pos.attempt_start = pos.iterations
        if self.on_reask is not None:
            self.on_reask()
        if self.text is not None:
            self.text.begin_attempt("structured_output_retry")
        again = (f"Answer again with corrected arguments for the {self.output} tool."
                 if self.output is not None else
                 "Answer again with JSON matching the schema." if spec is not None else
                 "Answer again.")
        return [UserMessage(content=f"Your previous answer was rejected: {problem}. {again}")]
