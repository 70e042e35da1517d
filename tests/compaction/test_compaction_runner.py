from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import anyio
import pytest

from bindloop.compaction import (
    DEFAULT_SUMMARY_INSTRUCTIONS,
    SUMMARY_REQUEST,
    CompactEmptySummaryError,
    CompactInvalidInputError,
    CompactPromptTooLongError,
    TailScope,
    build_summary_prompt,
    compact_conversation,
)
from bindloop.contracts import (
    AssistantMessage,
    ImagePart,
    Message,
    ModelTurnResult,
    SystemMessage,
    TextPart,
    ToolCall,
    ToolMessage,
    TurnUsage,
    UserMessage,
    content_text,
)
from bindloop.errors import PromptTooLongError, ProviderError
from bindloop.model import ModelRequest, StreamModel
from bindloop.signal import AbortController

from transcript.checkers import all_violations


class FakeModel(StreamModel):
    """Answers each call with the next scripted item: a result or an exception to raise."""

    def __init__(self, script: Sequence[ModelTurnResult | BaseException]) -> None:
        self.script = list(script)
        self.prompts: list[list[Message]] = []

    async def complete(self, messages: Sequence[Message], request: ModelRequest, /,
                       on_event: Any = None, on_reset: Any = None) -> ModelTurnResult:
        assert request.tools == ()
        self.prompts.append(messages)
        item = self.script.pop(0)
        if isinstance(item, BaseException):
            raise item
        return item


def ok(text: str = "the summary", tokens: int = 10) -> ModelTurnResult:
    return ModelTurnResult(text=text, usage=TurnUsage(input_tokens=tokens, output_tokens=1), cost=2)


def convo(rounds: int) -> list[Message]:
    out: list[Message] = [SystemMessage(content="sys")]
    for r in range(rounds):
        out += [UserMessage(content=f"question {r} " + "x" * 50), AssistantMessage(content=f"a{r}")]
    return out


def run(coro_fn, *args, **kw):  # type: ignore[no-untyped-def]
    return anyio.run(lambda: coro_fn(*args, **kw))


def _consecutive_users(prompt: Sequence[Message]) -> list[int]:
    return [i for i in range(1, len(prompt))
            if isinstance(prompt[i], UserMessage) and isinstance(prompt[i - 1], UserMessage)]


@pytest.mark.parametrize("tail", ["assistant", "user", "tool", "parts"])
def test_summary_prompt_never_sends_two_user_messages_in_a_row(tail: str) -> None:
    chunk: list[Message] = [UserMessage(content="q"), AssistantMessage(content="a")]
    if tail == "user":
        chunk.append(UserMessage(content="and then?"))
    elif tail == "parts":
        chunk.append(UserMessage(content=(TextPart(text="see"), ImagePart(url="u"))))
    elif tail == "tool":
        chunk += [AssistantMessage(tool_calls=(ToolCall(id="c", name="t"),)),
                  ToolMessage(tool_call_id="c", content="r")]
    prompt = build_summary_prompt(chunk)
    assert _consecutive_users(prompt) == []
    last = prompt[-1]
    assert isinstance(last, UserMessage)
    assert content_text(last.content).endswith(SUMMARY_REQUEST)
    assert sum(SUMMARY_REQUEST in content_text(m.content) for m in prompt
               if isinstance(m, UserMessage)) == 1
    if tail == "user":  # the person's words are kept, the request follows them
        assert content_text(last.content) == f"and then?\n\n{SUMMARY_REQUEST}"
    if tail == "parts":
        assert last.content == (TextPart(text="see"), TextPart(text="[image]"),
                                TextPart(text=SUMMARY_REQUEST))
    assert all_violations(prompt) == []


def test_summarizes_the_scope_with_a_provider_valid_prompt() -> None:
    msgs = convo(3)
    msgs[1] = UserMessage(content=(TextPart(text="look"), ImagePart(url="u")))
    model = FakeModel([ok()])
    snapshot = list(msgs)
    res = run(compact_conversation, model=model, messages=msgs, scope=TailScope(keep_turns=2))
    assert msgs == snapshot
    assert (res.summary, res.start, res.stop, res.attempts, res.cost) == ("the summary", 0, 5, 1, 2)
    prompt = model.prompts[0]
    assert prompt[0] == SystemMessage(content=DEFAULT_SUMMARY_INSTRUCTIONS)
    assert prompt[-1] == UserMessage(content=SUMMARY_REQUEST)
    assert UserMessage(content=(TextPart(text="look"), TextPart(text="[image]"))) in prompt
    assert SystemMessage(content="sys") not in prompt
    assert all_violations(prompt) == []


def test_prompt_too_long_retries_with_a_halved_head_then_gives_up() -> None:
    msgs = convo(8)
    model = FakeModel([PromptTooLongError("too long"), ok()])
    res = run(compact_conversation, model=model, messages=msgs)
    assert res.attempts == 2 and res.start > 0 and res.stop == len(msgs)
    assert len(model.prompts[1]) < len(model.prompts[0])
    model = FakeModel([PromptTooLongError("x")] * 10)
    with pytest.raises(CompactPromptTooLongError) as info:
        run(compact_conversation, model=model, messages=msgs, max_retries=2)
    assert info.value.attempts == 3


def test_prompt_too_long_behind_a_routed_attempt_error_shrinks_the_head() -> None:
    """Regression: RoutedModel raises the route's last AttemptError, *caused by* the wire's
    prompt-too-long error. compact_conversation used to check isinstance on the outer error, so it
    retried the same prompt as a transient failure and finally raised instead of shrinking."""
    from bindloop.routing import AttemptError
    from bindloop.wire import ProviderPromptTooLongError

    msgs = convo(8)
    refusal = ProviderPromptTooLongError("prompt is too long", wire="anthropic",
                                         category="context_length", status_code=400)
    routed = AttemptError("context_length", status_code=400, cause=refusal)
    model = FakeModel([routed, ok()])
    res = run(compact_conversation, model=model, messages=msgs)
    assert res.attempts == 2 and res.start > 0
    assert len(model.prompts[1]) < len(model.prompts[0])


def test_prompt_too_long_with_one_round_left_fails_at_once() -> None:
    model = FakeModel([PromptTooLongError("x")])
    with pytest.raises(CompactPromptTooLongError):
        run(compact_conversation, model=model, messages=[UserMessage(content="only")])


def test_transient_errors_retry_a_bounded_number_of_times() -> None:
    model = FakeModel([ProviderError("503"), ok(tokens=7)])
    res = run(compact_conversation, model=model, messages=convo(2))
    assert res.attempts == 2 and res.usage.input_tokens == 7
    boom = ProviderError("still down")
    model = FakeModel([ProviderError("1"), ProviderError("2"), boom])
    with pytest.raises(ProviderError) as info:
        run(compact_conversation, model=model, messages=convo(2), max_transient_retries=2)
    assert info.value is boom


def test_non_transient_errors_propagate_unchanged() -> None:
    err = KeyError("bug")
    with pytest.raises(KeyError) as info:
        run(compact_conversation, model=FakeModel([err]), messages=convo(2))
    assert info.value is err


def test_empty_summary_counts_as_a_failure_and_usage_accumulates() -> None:
    model = FakeModel([ok(text="  ", tokens=3), ok(text="real", tokens=4)])
    res = run(compact_conversation, model=model, messages=convo(2))
    assert res.summary == "real" and res.usage.input_tokens == 7 and res.cost == 4
    model = FakeModel([ok(text="")] * 3)
    with pytest.raises(CompactEmptySummaryError):
        run(compact_conversation, model=model, messages=convo(2))


def test_aborts_are_reraised_unchanged() -> None:
    ctl = AbortController()
    reason = RuntimeError("user pressed stop")
    ctl.abort(reason)
    model = FakeModel([ok()])
    with pytest.raises(RuntimeError) as info:
        run(compact_conversation, model=model, messages=convo(2), signal=ctl.signal)
    assert info.value is reason and model.prompts == []

    ctl2 = AbortController()
    err = ProviderError("connection reset by abort")

    class Aborting(FakeModel):
        async def complete(self, messages, request, on_event=None,  # type: ignore[no-untyped-def]
                           on_reset=None):
            ctl2.abort()
            raise err

    with pytest.raises(ProviderError) as info2:
        run(compact_conversation, model=Aborting([]), messages=convo(2), signal=ctl2.signal)
    assert info2.value is err


def test_invalid_input_raises_before_calling_the_model() -> None:
    model = FakeModel([])
    with pytest.raises(CompactInvalidInputError):
        run(compact_conversation, model=model, messages=[])
    assert model.prompts == []


def test_usage_of_every_summary_call_keeps_its_details_and_split() -> None:
    from bindloop.contracts import UsageIteration

    split = TurnUsage(input_tokens=30, output_tokens=5, cache_write_tokens=4, iterations=(
        UsageIteration(kind="compaction", input_tokens=20, output_tokens=3, cache_write_tokens=4),
        UsageIteration(kind="message", input_tokens=10, output_tokens=2)))
    first = ModelTurnResult(text="", usage=TurnUsage(input_tokens=7, output_tokens=1,
                                                     reasoning_tokens=1, cached_input_tokens=2))
    model = FakeModel([first, ModelTurnResult(text="real", usage=split)])
    res = run(compact_conversation, model=model, messages=convo(2))
    assert res.usage == TurnUsage(
        input_tokens=37, output_tokens=6, cached_input_tokens=2, reasoning_tokens=1,
        cache_write_tokens=4, iterations=(
            UsageIteration(kind="message", input_tokens=7, output_tokens=1,
                           cached_input_tokens=2),
            *split.iterations))
