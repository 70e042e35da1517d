"""The one retry loop (``retry_attempts``) and the one output test (``is_content_event``) that
ModelAdapter's retries, a route's fallback and the agent's retry middleware share: a retryable
failure before output is called again after the policy's delay, output already shown, a
cancellation, a non-retryable error or no policy is never called again, and the loop stops at
``max_attempts`` — a Hypothesis property over failure scripts."""

from __future__ import annotations

import anyio
import pytest
from hypothesis import given, settings, strategies as st

from bindloop.completion import ReasoningEvent, TextEvent, ToolCallChunk, ToolCallEvent, UsageEvent
from bindloop.contracts import ReasoningPart, TurnUsage
from bindloop.errors import UsageError
from bindloop.wire import RetryPolicy, TransportError, is_content_event, retry_attempts


class Sleeps:
    def __init__(self) -> None:
        self.calls: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.calls.append(seconds)


async def _run(policy: RetryPolicy | None, script: list[BaseException | None],
               produced_at: set[int], sleep: Sleeps) -> tuple[int, BaseException | None]:
    """Call under the loop: call n raises script[n] (None: returns) after producing output when n
    is in ``produced_at``. Returns how many calls ran and what escaped."""
    calls = 0
    try:
        for attempt in retry_attempts(policy, random=lambda: 0.5, sleep=sleep):
            async with attempt:
                n = calls
                calls += 1
                if n in produced_at:
                    attempt.produced = True
                error = script[n] if n < len(script) else None
                if error is not None:
                    raise error
                return calls, None
    except BaseException as exc:  # noqa: BLE001 - what escaped is the observation
        return calls, exc
    raise AssertionError("unreachable: every attempt returns or raises")


@settings(max_examples=150, deadline=None)
@given(max_attempts=st.integers(1, 5),
       script=st.lists(st.sampled_from(["retryable", "usage", "ok"]), min_size=1, max_size=6),
       produced_at=st.sets(st.integers(0, 5), max_size=3))
def test_the_loop_calls_again_only_for_a_retryable_failure_before_output(
        max_attempts: int, script: list[str], produced_at: set[int]) -> None:
    errors: dict[str, BaseException | None] = {
        "retryable": TransportError("reset"), "usage": UsageError("bad"), "ok": None}
    policy = RetryPolicy(max_attempts=max_attempts, backoff_ms=100.0, max_delay_ms=1_000.0)
    sleep = Sleeps()
    calls, escaped = anyio.run(_run, policy, [errors[s] for s in script], produced_at, sleep)
    # The expected run, step by step.
    expected_calls, expected_escape = 0, None
    for n in range(max_attempts):
        expected_calls += 1
        kind = script[n] if n < len(script) else "ok"
        if kind == "ok":
            break
        if kind == "usage" or n in produced_at or n + 1 == max_attempts:
            expected_escape = kind
            break
    assert calls == expected_calls
    if expected_escape is None:
        assert escaped is None
    else:
        assert escaped is errors[expected_escape]
    assert len(sleep.calls) == calls - 1
    assert sleep.calls == [policy.delay_ms(n + 1, TransportError("reset"), lambda: 0.5) / 1000.0
                           for n in range(calls - 1)]


def test_no_policy_is_one_call_and_a_cancellation_is_never_retried() -> None:
    sleep = Sleeps()
    assert anyio.run(_run, None, [TransportError("reset")], set(), sleep)[0] == 1
    calls, escaped = anyio.run(_run, RetryPolicy(max_attempts=5), [KeyboardInterrupt()], set(),
                               sleep)
    assert (calls, type(escaped), sleep.calls) == (1, KeyboardInterrupt, [])


def test_content_is_non_empty_text_reasoning_or_a_tool_call_delta() -> None:
    assert is_content_event(TextEvent(content="a"))
    assert not is_content_event(TextEvent(content=""))
    assert is_content_event(ReasoningEvent(part=ReasoningPart(text="")))
    assert is_content_event(ToolCallEvent(tool_call=ToolCallChunk(index=0, id="c", name="f")))
    assert not is_content_event(UsageEvent(usage=TurnUsage(input_tokens=1, output_tokens=1)))


@pytest.mark.parametrize("policy", [RetryPolicy(max_attempts=3)])
def test_a_call_that_returns_ends_the_loop_at_once(policy: RetryPolicy) -> None:
    sleep = Sleeps()
    assert anyio.run(_run, policy, [None], set(), sleep) == (1, None)
    assert sleep.calls == []
