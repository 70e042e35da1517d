from __future__ import annotations

from collections.abc import Sequence

import anyio

from bindloop.compaction import (
    SUMMARY_PREFIX,
    AutoCompactDecision,
    compaction_port,
)
from bindloop.contracts import (
    AssistantMessage,
    Message,
    ModelTurnResult,
    SystemMessage,
    TurnUsage,
    UserMessage,
)
from bindloop.loop import LoopCounters, ToolLoopParams, run_tool_loop
from bindloop.model import ModelRequest
from bindloop.testing import (
    final_answer,
    fresh_state,
    function_model,
    scripted_model,
    tool_call,
    tool_call_turn,
)
from bindloop.loop import LoopHooks, ToolRunner


def test_port_compacts_once_over_threshold_and_spend_is_not_a_turn() -> None:
    history: list[Message] = [SystemMessage(content="sys")]
    for r in range(6):
        history += [UserMessage(content=f"u{r}"), AssistantMessage(content=f"a{r}")]
    history.append(UserMessage(content="now"))
    state = fresh_state(history)
    big = TurnUsage(input_tokens=95_000, output_tokens=10)
    script = scripted_model([
        tool_call_turn([tool_call("read")], usage=big),
        tool_call_turn([tool_call("read")], usage=TurnUsage(input_tokens=96_000)),
        final_answer("done", usage=TurnUsage(input_tokens=97_000)),
    ])
    summaries: list[list[Message]] = []

    async def summarizer(messages: Sequence[Message], request: ModelRequest) -> ModelTurnResult:
        summaries.append(messages)
        return ModelTurnResult(text="SUMMARY", usage=TurnUsage(input_tokens=500, output_tokens=50),
                               cost=3)

    decisions: list[AutoCompactDecision] = []
    port = compaction_port(state=state, model=function_model(summarizer), context_window=120_000, keep_turns=3,
                           on_decision=decisions.append)

    async def tool(call):  # type: ignore[no-untyped-def]
        from bindloop.contracts import ToolResult
        return ToolResult(content="ok")

    params = ToolLoopParams(
        state=state,
        model=script,
        max_iterations=10,
        runner=ToolRunner(run_tool_call=tool),
        hooks=LoopHooks(compact=port),
    )
    result = anyio.run(run_tool_loop, params)
    assert result.stop_reason == "done"
    assert len(summaries) == 1                                # hysteresis: no second compaction
    assert result.stats.turns == 3                            # the compaction is not a turn
    assert result.stats.input_tokens == 95_000 + 96_000 + 97_000 + 500
    assert result.stats.cost == 3
    assert [d.reason for d in decisions] == ["no-usage", "threshold-exceeded",
                                             "insufficient-growth"]
    msgs = state.messages
    assert msgs[0] == SystemMessage(content="sys")
    assert msgs[1] == UserMessage(content=SUMMARY_PREFIX + "SUMMARY")
    assert UserMessage(content="u0") not in msgs
    # keep_turns=3 keeps three turns — a5, "now", and the tool-calling turn with its result — not
    # three messages.
    assert msgs[2:4] == [AssistantMessage(content="a5"), UserMessage(content="now")]
    assert UserMessage(content="u5") not in msgs


def test_port_leaves_short_transcripts_alone() -> None:
    state = fresh_state([UserMessage(content="hi")])
    state.counters = LoopCounters(last_prompt_tokens=119_000, has_fresh_token_count=True)

    async def never(messages, request):  # type: ignore[no-untyped-def]
        raise AssertionError("must not be called")

    port = compaction_port(state=state, model=function_model(never), context_window=120_000, keep_turns=6)
    assert anyio.run(port, list(state.messages)) is None


def test_compaction_spend_keeps_every_usage_detail_in_the_stats() -> None:
    """A summary that took two calls (an empty one, then the summary), each with cache and
    reasoning details: RunStats sums every detail of both, as it does for turns."""
    history: list[Message] = [SystemMessage(content="sys")]
    for r in range(6):
        history += [UserMessage(content=f"u{r}"), AssistantMessage(content=f"a{r}")]
    history.append(UserMessage(content="now"))
    state = fresh_state(history)
    script = scripted_model([
        tool_call_turn([tool_call("read")], usage=TurnUsage(input_tokens=95_000, output_tokens=10)),
        final_answer("done", usage=TurnUsage(input_tokens=20)),
    ])
    replies = [
        ModelTurnResult(text="", usage=TurnUsage(input_tokens=400, output_tokens=30,
                                                 cached_input_tokens=100, reasoning_tokens=20,
                                                 cache_write_tokens=50), cost=1),
        ModelTurnResult(text="SUMMARY", usage=TurnUsage(input_tokens=500, output_tokens=50,
                                                        cached_input_tokens=300,
                                                        reasoning_tokens=40,
                                                        cache_write_tokens=7), cost=2),
    ]

    async def summarizer(messages: Sequence[Message], request: ModelRequest) -> ModelTurnResult:
        return replies.pop(0)

    port = compaction_port(state=state, model=function_model(summarizer), context_window=120_000, keep_turns=3)

    async def tool(call):  # type: ignore[no-untyped-def]
        from bindloop.contracts import ToolResult
        return ToolResult(content="ok")

    params = ToolLoopParams(
        state=state,
        model=script,
        max_iterations=10,
        runner=ToolRunner(run_tool_call=tool),
        hooks=LoopHooks(compact=port),
    )
    result = anyio.run(run_tool_loop, params)
    assert not replies  # both summary calls ran
    stats = result.stats
    assert stats.input_tokens == 95_000 + 20 + 400 + 500
    assert stats.cached_input_tokens == 400
    assert stats.reasoning_tokens == 60
    assert stats.cache_write_tokens == 57
    assert stats.cost == 3
