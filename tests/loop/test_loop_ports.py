from __future__ import annotations

from typing import Any

import anyio
import msgspec
import pytest

from bindloop import (
    AbortController,
    AbortSignal,
    AssistantMessage,
    ModelTurnResult,
    RunCancelledError,
    RunTimeoutError,
    StepSettlement,
    ToolCall,
    ToolError,
    ToolLoopResult,
    ToolMessage,
    ToolResult,
    ToolSuspend,
    TurnUsage,
    UsageError,
    UserMessage,
    run_tool_loop,
)
from bindloop.run import create_run_deadline
from bindloop.contracts import CompactionApplied, RunStats
from bindloop.loop import LoopCounters
from bindloop.errors import AbortedToolCallError, PortContractError, ToolFailure
from bindloop.loop import (
    DiscardedTurnWithToolCallsError,
    InputBlockedBySuspendError,
    InvalidModelTurnError,
    MissingActivationPortError,
)
from bindloop.loop import ToolBatchOptions
from bindloop.testing import (
    ScriptExhaustedError,
    final_answer,
    fresh_state,
    loop_harness,
    scripted_model,
    stepping_clock,
    tool_call,
    tool_call_turn,
)
from bindloop.loop import LoopHooks, ToolLoopParams, ToolRunner
from bindloop.model import StreamModel


def run(h: Any) -> ToolLoopResult:
    return anyio.run(run_tool_loop, h.params)


def roles(h: Any) -> list[str]:
    return [type(m).__name__.removesuffix("Message").lower() for m in h.state.messages]


def test_seed_example_runs_three_turns() -> None:
    h = loop_harness([
        tool_call_turn([tool_call("search", {"q": "bind"}), tool_call("read_file")]),
        tool_call_turn([tool_call("write_file", {"path": "out.md"})]),
        final_answer("Done."),
    ])
    r = run(h)
    assert r.stop_reason == "done"
    assert r.stats.turns == 3 and r.stats.tool_calls == 3
    assert h.ran == ["search", "read_file", "write_file"]
    assert roles(h) == ["user", "assistant", "tool", "tool", "assistant", "tool", "assistant"]


def test_stats_and_state_fold_exactly_with_a_seed() -> None:
    state = fresh_state()
    state.totals = RunStats(input_tokens=1000, cost=50)
    state.counters = LoopCounters(requested_tool_calls=7)
    h = loop_harness([
        tool_call_turn([tool_call("a")], usage=TurnUsage(input_tokens=10, output_tokens=3,
                                                         cached_input_tokens=8), cost=2),
        final_answer("x", usage=TurnUsage(input_tokens=20, output_tokens=4), cost=5),
    ], state=state)
    r = run(h)
    s = r.stats
    assert (s.input_tokens, s.output_tokens, s.cached_input_tokens, s.cost) == (30, 7, 8, 7)
    assert (state.input_tokens, state.output_tokens, state.cached_input_tokens, state.cost) == (
        1030, 7, 8, 57)
    assert state.requested_tool_calls == 8 and s.tool_calls == 1
    assert state.last_prompt_tokens == 20 and state.last_output_tokens == 4
    # stepping clock: each reading advances 1 ms → each model call and tool call takes 1 ms
    assert s.model_ms == 2.0 and s.tool_ms == 1.0 and s.tools["a"].calls == 1


def test_iteration_limit_and_zero() -> None:
    h = loop_harness([tool_call_turn([tool_call("a")]), tool_call_turn([tool_call("b")])],
                     max_iterations=2)
    r = run(h)
    assert r.stop_reason == "iteration_limit" and r.stats.turns == 2
    h0 = loop_harness([final_answer("never")], max_iterations=0)
    assert run(h0).stop_reason == "iteration_limit" and h0.model.position == 0


def test_final_answer_at_the_ceiling_is_done() -> None:
    h = loop_harness([tool_call_turn([tool_call("a")]), final_answer("ok")], max_iterations=2)
    assert run(h).stop_reason == "done"


@pytest.mark.parametrize("bad", [-1, 1.5, "3", True])
def test_bad_max_iterations_is_a_usage_error(bad: Any) -> None:
    h = loop_harness([final_answer("x")], max_iterations=bad)
    with pytest.raises(UsageError, match="max_iterations"):
        run(h)


def test_script_exhaustion_raises() -> None:
    h = loop_harness([tool_call_turn([tool_call("a")])])
    with pytest.raises(ScriptExhaustedError):
        run(h)


def test_duplicate_script_ids_raise_at_construction() -> None:
    with pytest.raises(UsageError, match="twice"):
        loop_harness([tool_call_turn([tool_call("a", id="x")]),
                      tool_call_turn([tool_call("b", id="x")])])


def test_thrown_tool_becomes_a_readable_error_and_is_reported() -> None:
    rejected: list[tuple[str, BaseException]] = []

    def boom(args: dict[str, Any]) -> Any:
        raise ValueError("disk full")

    h = loop_harness(
        [tool_call_turn([tool_call("w")]), final_answer("sorry")],
        tools={"w": boom},
        hooks=LoopHooks(on_tool_call_rejected=lambda i, e: rejected.append((i, e))),
    )
    r = run(h)
    assert r.stop_reason == "done"
    msg = h.state.messages[2]
    assert isinstance(msg, ToolMessage) and msg.is_error
    # The message stays with the host (it may hold a secret); the model reads the type only.
    assert msg.content == '{"error":"ValueError: the tool failed","kind":"error"}'
    assert [(i, type(e), str(e)) for i, e in rejected] == [("call_1_0", ValueError, "disk full")]
    assert h.ran == ["w"] and h.side_effects == []


def _first_tool_message(tool: Any, **rules: Any) -> ToolMessage:
    h = loop_harness([tool_call_turn([tool_call("w")]), final_answer("ok")], tools={"w": tool},
                     runner=ToolRunner(**rules))
    assert run(h).stop_reason == "done"
    msg = h.state.messages[2]
    assert isinstance(msg, ToolMessage) and msg.is_error
    return msg


def test_a_tool_exception_never_sends_its_message_to_the_model_by_default() -> None:
    canary = "db password=hunter2-canary refused"

    def leaky(args: dict[str, Any]) -> Any:
        raise RuntimeError(canary)

    msg = _first_tool_message(leaky)
    assert msg.content == '{"error":"RuntimeError: the tool failed","kind":"error"}'
    assert "hunter2" not in msgspec.json.encode(msg).decode()


def test_a_tool_failure_raised_on_purpose_keeps_its_message() -> None:
    def refuses(args: dict[str, Any]) -> Any:
        raise ToolFailure("the file is read-only; pick another path", kind="rejected")

    msg = _first_tool_message(refuses, format_tool_exception=lambda exc: ToolError(error="never"))
    assert msg.content == '{"error":"the file is read-only; pick another path","kind":"rejected"}'


def test_format_tool_exception_lets_the_host_opt_into_more() -> None:
    def boom(args: dict[str, Any]) -> Any:
        raise KeyError("user_42")

    seen: list[Exception] = []

    def fmt(exc: Exception) -> ToolError:
        seen.append(exc)
        return ToolError(error=f"lookup failed for {exc}", kind="not_found")

    msg = _first_tool_message(boom, format_tool_exception=fmt)
    assert msg.content == '{"error":"lookup failed for \'user_42\'","kind":"not_found"}'
    assert [type(e) for e in seen] == [KeyError]


def test_format_tool_exception_must_return_a_tool_error() -> None:
    def boom(args: dict[str, Any]) -> Any:
        raise ValueError("x")

    h = loop_harness(
        [tool_call_turn([tool_call("w")]), final_answer("ok")],
        tools={"w": boom},
        runner=ToolRunner(format_tool_exception=lambda exc: "oops"),
    )
    with pytest.raises(PortContractError, match="format_tool_exception"):
        run(h)


def test_fatal_tool_error_propagates() -> None:
    class PersistenceError(Exception):
        pass

    def fail(args: dict[str, Any]) -> Any:
        raise PersistenceError("could not record")

    h = loop_harness(
        [tool_call_turn([tool_call("w")]), final_answer("x")],
        tools={"w": fail},
        runner=ToolRunner(is_fatal_tool_error=lambda e: isinstance(e, PersistenceError)),
    )
    with pytest.raises(PersistenceError):
        run(h)


@pytest.mark.parametrize("pooled", [False, True])
def test_cancellation_is_always_fatal(pooled: bool) -> None:
    def cancel(args: dict[str, Any]) -> Any:
        raise RunCancelledError("user cancelled")

    calls = [tool_call("c")] + ([tool_call("other")] if pooled else [])
    h = loop_harness([tool_call_turn(calls), final_answer("x")], tools={"c": cancel})
    with pytest.raises(RunCancelledError):
        run(h)


def test_serial_calls_run_first_alone_and_activation_applies_before_the_next() -> None:
    log: list[str] = []
    active: set[str] = set()

    async def activate(args: dict[str, Any]) -> Any:
        log.append("activate-tool")
        return ToolResult(content="loaded", activate_plugins=("files",))

    async def needs_files(args: dict[str, Any]) -> Any:
        log.append(f"read sees {sorted(active)}")
        return "content"

    def activate_port(kind: str, names: tuple[str, ...]) -> None:
        log.append(f"activate {kind} {list(names)}")
        active.update(names)

    h = loop_harness(
        [tool_call_turn([tool_call("read"), tool_call("load_plugin"), tool_call("read")]),
         final_answer("x")],
        tools={"load_plugin": activate, "read": needs_files},
        runner=ToolRunner(runs_serially=lambda c: c.name == "load_plugin"),
        hooks=LoopHooks(activate=activate_port),
    )
    run(h)
    assert log == ["activate-tool", "activate plugins ['files']", "read sees ['files']",
                   "read sees ['files']"]
    # results still in the model's order
    assert [m.tool_call_id for m in h.state.messages if isinstance(m, ToolMessage)] == [
        "call_1_0", "call_1_1", "call_1_2"]


def test_activation_with_unwired_port_is_reported_not_dropped() -> None:
    rejected: list[BaseException] = []
    h = loop_harness(
        [tool_call_turn([tool_call("load")]), final_answer("x")],
        tools={"load": lambda a: ToolResult(content="ok", activate_skills=("pdf",))},
        hooks=LoopHooks(on_tool_call_rejected=lambda i, e: rejected.append(e)),
    )
    assert run(h).stop_reason == "done"
    assert len(rejected) == 1 and isinstance(rejected[0], MissingActivationPortError)
    assert rejected[0].names == ("pdf",)


def test_pooled_calls_run_concurrently_and_answer_in_model_order() -> None:
    started: list[str] = []
    peak = [0, 0]

    async def slow(args: dict[str, Any]) -> Any:
        started.append(args["n"])
        peak[0] += 1
        peak[1] = max(peak[1], peak[0])
        await anyio.sleep(0.01 if args["n"] == "1" else 0)
        peak[0] -= 1
        return args["n"]

    h = loop_harness(
        [tool_call_turn([tool_call("s", {"n": "1"}), tool_call("s", {"n": "2"}),
                         tool_call("t", {"n": "3"})]), final_answer("x")],
        tools={"s": slow, "t": slow},
    )
    run(h)
    assert peak[1] == 3
    assert [m.content for m in h.state.messages if isinstance(m, ToolMessage)] == ['1', '2', '3']


def test_max_per_tool_bounds_a_pool() -> None:
    live = [0, 0]

    async def tool(args: dict[str, Any]) -> Any:
        live[0] += 1
        live[1] = max(live[1], live[0])
        await anyio.sleep(0.001)
        live[0] -= 1
        return "ok"

    h = loop_harness(
        [tool_call_turn([tool_call("s") for _ in range(4)]), final_answer("x")],
        tools={"s": tool},
        runner=ToolRunner(batch_options=ToolBatchOptions(max_per_tool=2)),
    )
    run(h)
    assert live[1] == 2


def test_abort_mid_batch_answers_queued_calls_as_not_run() -> None:
    controller = AbortController()
    rejected: list[BaseException] = []

    def first(args: dict[str, Any]) -> Any:
        controller.abort("budget")
        return "did it"

    h = loop_harness(
        [tool_call_turn([tool_call("a"), tool_call("a"), tool_call("a")]), final_answer("x")],
        tools={"a": first},
        signal=controller.signal,
        runner=ToolRunner(batch_options=ToolBatchOptions(max_per_tool=1)),
        hooks=LoopHooks(on_tool_call_rejected=lambda i, e: rejected.append(e)),
    )
    r = run(h)
    assert r.stop_reason == "aborted"
    assert h.ran == ["a"]
    assert h.state.requested_tool_calls == 3 and r.stats.tool_calls == 1
    tool_msgs = [m for m in h.state.messages if isinstance(m, ToolMessage)]
    assert len(tool_msgs) == 3
    assert tool_msgs[1].is_error and '"kind":"not_run"' in str(tool_msgs[1].content)
    assert all(isinstance(e, AbortedToolCallError) for e in rejected) and len(rejected) == 2


def test_pre_aborted_signal_makes_no_model_call() -> None:
    c = AbortController()
    c.abort()
    h = loop_harness([final_answer("x")], signal=c.signal)
    assert run(h).stop_reason == "aborted" and h.model.position == 0


def test_the_signals_checks_are_polled_at_every_boundary() -> None:
    seen: list[str] = []
    controller = AbortController()

    def cancelled() -> None:
        seen.append("c")

    controller.signal.add_check(cancelled)
    controller.signal.add_check(lambda: "enough" if len(seen) >= 2 else None)
    h = loop_harness(
        [tool_call_turn([tool_call("a")]), tool_call_turn([tool_call("b")]), final_answer("x")],
        signal=controller.signal,
    )
    r = run(h)
    # boundary 1: the checks hold, go on; boundary 2: stop before the second model call
    assert r.stop_reason == "aborted" and r.stats.turns == 1 and seen == ["c", "c"]
    assert controller.signal.reason == "enough"


def test_a_deadline_is_a_signal_whose_expiry_is_raised_between_iterations() -> None:
    clock = stepping_clock(0, 0)
    deadline = create_run_deadline(timeout_ms=10, label="agent run", now=clock)

    def slow(args: dict[str, Any]) -> str:
        clock.advance(20)
        return "done"

    h = loop_harness([tool_call_turn([tool_call("a")]), final_answer("x")], tools={"a": slow},
                     signal=deadline.signal)
    with pytest.raises(RunTimeoutError, match="'agent run' timed out after 10 ms"):
        run(h)
    assert h.ran == ["a"] and deadline.signal.aborted


@pytest.mark.parametrize("reason, raised", [
    (RunCancelledError("the host went away"), RunCancelledError),
    (RunTimeoutError("budget spent", label="x"), RunTimeoutError),
    ("the user pressed stop", None),
])
def test_a_fired_signals_reason_decides_between_aborted_and_raised(
        reason: object, raised: type[Exception] | None) -> None:
    h = loop_harness([final_answer("x")], signal=AbortSignal.aborted_with(reason))
    if raised is None:
        assert run(h).stop_reason == "aborted"
    else:
        with pytest.raises(raised) as caught:
            run(h)
        assert caught.value is reason
    assert h.model.position == 0  # no model call


def test_waiting_for_reply_withholds_the_result_and_later_calls_close_the_gap() -> None:
    ordinals: list[tuple[str, int]] = []
    h = loop_harness(
        [tool_call_turn([tool_call("a"), tool_call("ask"), tool_call("b")]), final_answer("x")],
        tools={"ask": lambda a: ToolSuspend(mode="waiting_for_reply", detail="Which file?")},
        hooks=LoopHooks(
            before_tool_message_accepted=lambda m, o: ordinals.append((m.tool_call_id, o)),
        ),
    )
    r = run(h)
    assert r.stop_reason == "waiting_for_reply"
    assert ordinals == [("call_1_0", 0), ("call_1_2", 1)]
    assert [s.tool_call_id for s in h.state.open_suspends] == ["call_1_1"]
    assert h.state.open_suspends[0].detail == "Which file?"


def test_answer_delivered_at_settle_clears_the_suspend_and_continues() -> None:
    def settle(would_end: bool) -> StepSettlement | None:
        if not would_end:
            return StepSettlement(messages=(
                ToolMessage(tool_call_id="call_1_0", content="yes"),
                UserMessage(content="and also this"),
            ))
        return None

    h = loop_harness(
        [tool_call_turn([tool_call("ask")]), final_answer("thanks")],
        tools={"ask": lambda a: ToolSuspend(mode="waiting_for_reply")},
        hooks=LoopHooks(on_step_settled=settle),
    )
    r = run(h)
    assert r.stop_reason == "done"
    assert roles(h) == ["user", "assistant", "tool", "user", "assistant"]
    assert h.state.open_suspends == []


def test_user_input_while_suspended_is_blocked_and_reported() -> None:
    rejected: list[tuple[str, BaseException]] = []
    h = loop_harness(
        [tool_call_turn([tool_call("ask")]), final_answer("x")],
        tools={"ask": lambda a: ToolSuspend(mode="waiting_for_reply")},
        hooks=LoopHooks(
            on_step_settled=lambda w: StepSettlement(messages=(UserMessage(content="hello?"),)),
            on_tool_call_rejected=lambda i, e: rejected.append((i, e)),
        ),
    )
    r = run(h)
    assert r.stop_reason == "waiting_for_reply"
    assert roles(h) == ["user", "assistant"]
    assert rejected[0][0] == "call_1_0" and isinstance(rejected[0][1], InputBlockedBySuspendError)


def test_wake_suspend_still_ends_the_run_after_another_answer() -> None:
    h = loop_harness(
        [tool_call_turn([tool_call("ask"), tool_call("sleep")]), final_answer("x")],
        tools={"ask": lambda a: ToolSuspend(mode="waiting_for_reply"),
               "sleep": lambda a: ToolSuspend(mode="resuming_later")},
        hooks=LoopHooks(
            on_step_settled=lambda w: StepSettlement(
            messages=(ToolMessage(tool_call_id="call_1_0", content="answer"),)),
        ),
    )
    assert run(h).stop_reason == "resuming_later"


def test_state_with_open_suspend_makes_no_model_call() -> None:
    h = loop_harness(
        [tool_call_turn([tool_call("sleep")]), final_answer("x")],
        tools={"sleep": lambda a: ToolSuspend(mode="resuming_later")},
    )
    assert run(h).stop_reason == "resuming_later"
    position = h.model.position
    assert run(h).stop_reason == "resuming_later" and h.model.position == position


def test_settle_runs_before_nudge_and_input_outranks_it() -> None:
    order: list[str] = []
    delivered = [False]

    def settle(would_end: bool) -> StepSettlement | None:
        order.append(f"settle {would_end}")
        if would_end and not delivered[0]:
            delivered[0] = True
            return StepSettlement(messages=(UserMessage(content="one more thing"),))
        return None

    def nudge(turn: ModelTurnResult) -> list[Any] | None:
        order.append("nudge")
        return None

    h = loop_harness(
        [final_answer("a"), final_answer("b")],
        hooks=LoopHooks(on_step_settled=settle, on_turn_would_end=nudge),
    )
    assert run(h).stop_reason == "done"
    assert order == ["settle True", "settle True", "nudge"]


def test_nudge_continues_the_run() -> None:
    nudges = [0]

    def nudge(turn: ModelTurnResult) -> list[Any] | None:
        nudges[0] += 1
        return [UserMessage(content="keep going")] if nudges[0] == 1 else None

    h = loop_harness(
        [final_answer("stalled"), final_answer("finished")],
        hooks=LoopHooks(on_turn_would_end=nudge),
    )
    r = run(h)
    assert r.stop_reason == "done" and r.stats.turns == 2


def test_a_stop_outranks_delivered_input_which_is_kept() -> None:
    controller = AbortController()
    controller.signal.add_check(lambda: "stop" if h.state.requested_tool_calls else None)
    h = loop_harness(
        [tool_call_turn([tool_call("a")]), final_answer("x")],
        signal=controller.signal,
        hooks=LoopHooks(
            on_step_settled=lambda w: StepSettlement(messages=(UserMessage(content="late"),)),
        ),
    )
    r = run(h)
    assert r.stop_reason == "aborted"
    assert roles(h)[-1] == "user"


def test_settle_stop_ends_aborted_with_messages_appended() -> None:
    h = loop_harness(
        [final_answer("x"), final_answer("y")],
        hooks=LoopHooks(
            on_step_settled=lambda w: StepSettlement(
                         messages=(UserMessage(content="bye"),), stop=True),
        ),
    )
    assert run(h).stop_reason == "aborted"
    assert roles(h) == ["user", "assistant", "user"]


def test_discarded_empty_turn_folds_spend_but_is_not_appended() -> None:
    h = loop_harness([
        ModelTurnResult(usage=TurnUsage(input_tokens=5, output_tokens=0), cost=1,
                        accept_message=False),
    ])
    r = run(h)
    assert r.stop_reason == "done" and r.stats.turns == 1 and r.stats.cost == 1
    assert roles(h) == ["user"]


def test_discard_refused_for_a_turn_with_tool_calls() -> None:
    rejected: list[BaseException] = []
    turn = tool_call_turn([tool_call("a")])
    turn = ModelTurnResult(tool_calls=turn.tool_calls, accept_message=False)
    h = loop_harness(
        [turn, final_answer("x")],
        hooks=LoopHooks(on_tool_call_rejected=lambda i, e: rejected.append(e)),
    )
    run(h)
    assert isinstance(rejected[0], DiscardedTurnWithToolCallsError)
    assert roles(h) == ["user", "assistant", "tool", "assistant"]


def test_before_tool_message_accepted_raise_fails_the_run_without_appending() -> None:
    def commit(message: ToolMessage, ordinal: int) -> None:
        if ordinal == 1:
            raise OSError("db down")

    h = loop_harness(
        [tool_call_turn([tool_call("a"), tool_call("b")]), final_answer("x")],
        hooks=LoopHooks(before_tool_message_accepted=commit),
    )
    with pytest.raises(OSError):
        run(h)
    assert roles(h) == ["user", "assistant", "tool"]


def test_compaction_contributes_spend_but_not_a_turn() -> None:
    def compact(messages: list[Any]) -> CompactionApplied | None:
        if len(messages) > 2:
            return CompactionApplied(messages=(UserMessage(content="summary"),),
                                     usage=TurnUsage(input_tokens=100, output_tokens=10), cost=3)
        return None

    h = loop_harness(
        [tool_call_turn([tool_call("a")]), final_answer("x")],
        hooks=LoopHooks(compact=compact),
    )
    r = run(h)
    assert r.stats.turns == 2 and r.stats.input_tokens == 100 and r.stats.cost == 3
    assert roles(h) == ["user", "assistant"]
    assert h.state.messages[0] == UserMessage(content="summary")


def test_on_assistant_message_fires_per_message_including_narration() -> None:
    seen: list[AssistantMessage] = []
    h = loop_harness(
        [tool_call_turn([tool_call("a")], text="Let me look."), final_answer("Done")],
        hooks=LoopHooks(on_assistant_message=seen.append),
    )
    run(h)
    assert [m.content for m in seen] == ["Let me look.", "Done"]


def test_progress_updates_report_live_totals() -> None:
    seen: list[tuple[int, int]] = []
    h = loop_harness(
        [tool_call_turn([tool_call("a")], usage=TurnUsage(output_tokens=5)),
                      final_answer("x", usage=TurnUsage(output_tokens=2))],
        hooks=LoopHooks(on_progress_update=lambda o, t: seen.append((o, t))),
    )
    run(h)
    assert seen == [(5, 1), (5, 1), (7, 1)]


@pytest.mark.parametrize(
    ("turn", "fragment"),
    [
        (ModelTurnResult(tool_calls=(ToolCall(id="", name="a"),)), "no id"),
        (ModelTurnResult(tool_calls=(ToolCall(id="x", name="a", arguments={"a": 1}),)),  # type: ignore[arg-type]
         "raw JSON string"),
        (ModelTurnResult(tool_calls=(ToolCall(id="x", name="a"), ToolCall(id="x", name="b"))),
         "repeats id"),
        (ModelTurnResult(usage=TurnUsage(input_tokens=-1)), "usage.input_tokens"),
    ],
)
def test_malformed_model_turn_is_a_typed_error(turn: ModelTurnResult, fragment: str) -> None:
    h = loop_harness([], model=_Answers(turn))
    with pytest.raises(InvalidModelTurnError, match=fragment):
        run(h)


def test_port_returning_the_wrong_type() -> None:
    with pytest.raises(PortContractError, match="call_model returned dict"):
        run(loop_harness([], model=_Answers({"text": "hi"})))

    h = loop_harness(
        [tool_call_turn([tool_call("a")])],
        tools={"a": lambda a: None},
        runner=ToolRunner(run_tool_call=lambda c: "not an outcome"),
    )
    with pytest.raises(PortContractError, match="run_tool_call returned str"):
        run(h)


def test_tool_definitions_are_rebuilt_each_turn() -> None:
    from bindloop import ToolDefinition

    active = {"base"}

    def build() -> list[ToolDefinition]:
        return [ToolDefinition(name=n) for n in sorted(active)]

    h = loop_harness(
        [tool_call_turn([tool_call("load")]), final_answer("x")],
        tools={"load": lambda a: ToolResult(content="ok", activate_plugins=("extra",))},
        runner=ToolRunner(build_tools=build),
        hooks=LoopHooks(activate=lambda kind, names: active.update(names)),
    )
    run(h)
    assert [c[1] for c in h.model.calls] == [("base",), ("base", "extra")]


def test_runs_on_trio_too() -> None:
    h = loop_harness([tool_call_turn([tool_call("a"), tool_call("b")]), final_answer("x")])
    r = anyio.run(run_tool_loop, h.params, backend="trio")
    assert r.stop_reason == "done" and r.stats.tool_calls == 2


def test_tool_error_outcome_is_not_a_rejection() -> None:
    rejected: list[Any] = []
    h = loop_harness(
        [tool_call_turn([tool_call("a")]), final_answer("x")],
        tools={"a": lambda a: ToolError(error="nope", kind="validation")},
        hooks=LoopHooks(on_tool_call_rejected=lambda i, e: rejected.append(e)),
    )
    run(h)
    assert rejected == []
    assert h.state.messages[2].content == '{"error":"nope","kind":"validation"}'


def test_build_tools_returning_the_wrong_type() -> None:
    h = loop_harness([final_answer("x")], runner=ToolRunner(build_tools=lambda: [{"name": "add"}]))
    with pytest.raises(PortContractError, match=r"build_tools\(\)\[0\] is dict"):
        run(h)
    h = loop_harness([final_answer("x")], runner=ToolRunner(build_tools=lambda: None))
    with pytest.raises(PortContractError, match="build_tools returned NoneType"):
        run(h)


def test_two_fatal_errors_at_once_raise_the_first_as_itself() -> None:
    class Fatal(Exception):
        pass

    async def fail(args: dict[str, Any]) -> Any:
        await anyio.sleep(0)
        raise Fatal(args["n"])

    h = loop_harness(
        [tool_call_turn([tool_call("a", {"n": "1"}), tool_call("b", {"n": "2"})]),
                      final_answer("x")],
        tools={"a": fail, "b": fail},
        runner=ToolRunner(is_fatal_tool_error=lambda e: isinstance(e, Fatal)),
    )
    with pytest.raises(Fatal) as info:
        run(h)
    assert str(info.value) == "1"
    assert any("also raised concurrently: Fatal: 2" in n for n in getattr(info.value, "__notes__", []))


@pytest.mark.parametrize(
    ("overrides", "fragment"),
    [
        ({"tools": {"a": lambda a: ToolResult(content=5)}},  # type: ignore[arg-type]
         r"run_tool_call\('call_1_0'\).content must be a str"),
        ({"tools": {"a": lambda a: ToolResult(content=("x",))}},  # type: ignore[arg-type]
         r"content\[0\] is str, not a content part"),
        ({"tools": {"a": lambda a: ToolResult(content="ok", activate_plugins=["p"])}},  # type: ignore[arg-type]
         "activate_plugins must be a tuple"),
        ({"tools": {"a": lambda a: ToolSuspend(mode="later")}},  # type: ignore[arg-type]
         "ToolSuspend.mode must be one of"),
        ({"hooks": LoopHooks(compact=lambda m: CompactionApplied(messages=("hello",)))},  # type: ignore[arg-type]
         r"compact\(\).messages\[0\] is str, not a Message"),
        ({"hooks": LoopHooks(compact=lambda m: CompactionApplied(
            messages=(UserMessage(content="s"),), usage=TurnUsage(input_tokens=-5)))},
         r"compact\(\).usage.input_tokens must be a non-negative int"),
        ({"hooks": LoopHooks(compact=lambda m: CompactionApplied(
            messages=(UserMessage(content="s"),), cost=1.5))},  # type: ignore[arg-type]
         r"compact\(\).cost must be an int"),
        ({"hooks": LoopHooks(on_turn_would_end=lambda turn: UserMessage(content="go on"))},  # type: ignore[arg-type, return-value]
         r"on_turn_would_end\(\) must be a list or tuple of messages"),
        ({"hooks": LoopHooks(on_step_settled=lambda w: StepSettlement(
            messages=({"role": "user"},)))},  # type: ignore[arg-type]
         r"on_step_settled\(\).messages\[0\] is dict, not a Message"),
        ({"runner": ToolRunner(runs_serially=lambda c: 1)},  # type: ignore[arg-type, return-value]
         "runs_serially must return a bool"),
    ],
)
def test_port_values_of_the_wrong_shape_are_typed_errors(overrides: dict[str, Any],
                                                         fragment: str) -> None:
    h = loop_harness([tool_call_turn([tool_call("a")]), final_answer("x"), final_answer("y")],
                     **overrides)
    with pytest.raises(PortContractError, match=fragment):
        run(h)


@pytest.mark.parametrize(
    ("turn", "fragment"),
    [
        (ModelTurnResult(usage=None), "usage must be a TurnUsage"),  # type: ignore[arg-type]
        (ModelTurnResult(text=5), "text must be a str or None"),  # type: ignore[arg-type]
        (ModelTurnResult(text="x", accept_message="no"), "accept_message must be a bool"),  # type: ignore[arg-type]
        (ModelTurnResult(reasoning=["r"]), "reasoning must be a tuple"),  # type: ignore[arg-type]
    ],
)
def test_malformed_turn_fields(turn: ModelTurnResult, fragment: str) -> None:
    with pytest.raises(InvalidModelTurnError, match=fragment):
        run(loop_harness([], model=_Answers(turn)))


@pytest.mark.parametrize("group, port", [
    (ToolRunner, "is_fatal_tool_error"), (ToolRunner, "runs_serially"),
    (LoopHooks, "on_tool_call_rejected"), (LoopHooks, "on_progress_update"),
])
def test_async_function_on_a_synchronous_port_is_refused(group: type, port: str) -> None:
    async def wrong(*args: Any) -> Any:
        raise AssertionError("never awaited")

    def boom(args: dict[str, Any]) -> Any:
        raise ValueError("x")

    h = loop_harness([tool_call_turn([tool_call("a")]), final_answer("x")], tools={"a": boom},
                     **{"runner" if group is ToolRunner else "hooks": group(**{port: wrong})})
    with pytest.raises(PortContractError, match=f"{port}"):
        run(h)


def test_an_async_signal_check_is_refused() -> None:
    async def wrong() -> Any:
        raise AssertionError("never awaited")

    controller = AbortController()
    controller.signal.add_check(wrong)
    with pytest.raises(UsageError, match="a signal's check must be a plain function"):
        run(loop_harness([final_answer("x")], signal=controller.signal))
    assert not controller.signal.aborted


def test_a_model_whose_complete_is_not_awaitable_is_a_clear_error() -> None:
    class Sync(_Answers):
        def complete(self, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
            return final_answer("x")

    h = loop_harness([], model=Sync(None))
    with pytest.raises(PortContractError,
                       match="model.complete returned ModelTurnResult instead of an awaitable"):
        run(h)


def test_a_runner_without_run_tool_call_and_a_port_that_is_no_function_are_refused() -> None:
    with pytest.raises(PortContractError, match="the runner has no run_tool_call"):
        anyio.run(run_tool_loop, ToolLoopParams(
            model=scripted_model([final_answer("x")]), runner=ToolRunner(), state=fresh_state(),
            max_iterations=1))
    with pytest.raises(UsageError, match=r"ToolRunner\(runs_serially=...\) must be callable"):
        ToolRunner(runs_serially=True)  # type: ignore[arg-type]


def test_hooks_and_runner_rules_from_a_subclass_are_the_wired_ones() -> None:
    seen: list[str] = []

    class Hooks(LoopHooks):
        def on_assistant_message(self, message: AssistantMessage, /) -> None:
            seen.append(f"assistant {len(message.tool_calls)}")

    class Runner(ToolRunner):
        def run_tool_call(self, call: ToolCall, /) -> ToolResult:
            seen.append(f"run {call.name}")
            return ToolResult(content="ok")

        def is_fatal_tool_error(self, exc: BaseException, /) -> bool:
            return super().is_fatal_tool_error(exc) or isinstance(exc, KeyError)

    hooks, runner = Hooks(), Runner()
    assert hooks.wired == {"on_assistant_message"}
    assert runner.wired == {"run_tool_call", "is_fatal_tool_error"}
    result = anyio.run(run_tool_loop, ToolLoopParams(
        model=scripted_model([tool_call_turn([tool_call("a")]), final_answer("x")]),
        runner=runner, hooks=hooks, state=fresh_state(), max_iterations=3))
    assert result.stop_reason == "done"
    assert seen == ["assistant 1", "run a", "assistant 0"]


class _Answers(StreamModel):
    """A model answering every call with ``value`` as it is (checked only by the loop)."""

    def __init__(self, value: Any) -> None:
        self.value = value

    async def complete(self, messages: Any, request: Any, on_event: Any = None,
                       on_reset: Any = None) -> Any:
        return self.value
