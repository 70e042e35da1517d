"""Hypothesis drives the pure loop machine with random worlds — turns, outcomes, suspends, aborts,
host input, nudges, compactions — without an event loop, and checks the loop's invariants."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from bindloop.contracts import (
    AssistantMessage,
    ModelTurnResult,
    ToolCall,
    ToolError,
    ToolMessage,
    ToolResult,
    ToolSuspend,
    TurnUsage,
    UserMessage,
)
from bindloop.errors import AbortedToolCallError, ProtocolError
from bindloop.contracts import CompactionApplied, RunStats
from bindloop.loop import LoopCounters, StepSettlement, ToolLoopState
from bindloop.lowlevel import (
    AcceptToolMessage,
    Activate,
    AskNudge,
    Boundary,
    CallModel,
    CheckBoundary,
    Compact,
    Finish,
    LoopMachine,
    NotifyAssistant,
    NotifyProgress,
    Reject,
    RunPooled,
    RunSerial,
    Settle,
    ToolFinished,
)

NAMES = ("add", "load", "search")
OUTCOMES = ("result", "result", "result", "error", "wait", "later", "not_run", "activate")


@st.composite
def worlds(draw: st.DrawFn) -> dict[str, Any]:
    return {
        "max_iterations": draw(st.integers(0, 7)),
        "serial": draw(st.frozensets(st.sampled_from(NAMES))),
        "flags": {k: draw(st.booleans()) for k in (
            "has_activate_plugins", "has_activate_skills", "has_compact", "has_settle",
            "has_nudge", "has_accept_hook", "has_notify_assistant", "has_progress",
            "has_control")},
        "seed_tokens": draw(st.integers(0, 1000)),
        "seed_cost": draw(st.integers(0, 100)),
    }


def drive(data: st.DataObject, world: dict[str, Any]) -> None:
    state = ToolLoopState(messages=[UserMessage(content="go")],
                          totals=RunStats(input_tokens=world["seed_tokens"], cost=world["seed_cost"]),
                          counters=LoopCounters(requested_tool_calls=3))
    serial = world["serial"]
    m = LoopMachine(state, world["max_iterations"], runs_serially=lambda c: c.name in serial,
                    **world["flags"])
    counter = 0
    turns = ran = requested = 0
    usage_in = usage_out = cost = aux_in = aux_cost = 0
    ordinals: list[int] = []
    batch_ordinals: list[list[int]] = []
    suspended_ids: set[str] = set()
    expected_rejections = 0
    rejections = 0
    aborted_batch = False
    stop_reason = None
    compactions = 0
    ran_by_name: dict[str, int] = {}
    boundaries = 0

    m.start()
    for _ in range(500):
        effect = m.next_effect()
        if isinstance(effect, CheckBoundary):
            if ordinals:
                batch_ordinals.append(ordinals)
                ordinals = []
            m.boundary_checked(data.draw(st.integers(0, 9)) == 0)
        elif isinstance(effect, Compact):
            if data.draw(st.booleans()):
                u = TurnUsage(input_tokens=data.draw(st.integers(0, 50)))
                aux_in += u.input_tokens
                aux_cost += 2
                compactions += 1
                # a compaction that keeps the transcript (so the structural checks still apply)
                m.compacted(CompactionApplied(messages=tuple(state.messages), usage=u, cost=2), 1.0)
            else:
                m.compacted(None, 1.0)
        elif isinstance(effect, CallModel):
            n = data.draw(st.integers(0, 3))
            calls = []
            for _ in range(n):
                counter += 1
                calls.append(ToolCall(id=f"c{counter}", name=data.draw(st.sampled_from(NAMES))))
            u = TurnUsage(input_tokens=data.draw(st.integers(0, 100)),
                          output_tokens=data.draw(st.integers(0, 100)))
            c = data.draw(st.integers(0, 5))
            accept = data.draw(st.integers(0, 5)) != 0
            if not accept and calls:
                expected_rejections += 1
            turn = ModelTurnResult(text=data.draw(st.none() | st.just("t")), tool_calls=tuple(calls),
                                   usage=u, cost=c, accept_message=accept)
            turns += 1
            requested += n
            usage_in += u.input_tokens
            usage_out += u.output_tokens
            cost += c
            m.model_replied(turn, 2.0)
        elif isinstance(effect, (RunSerial, RunPooled)):
            items = [(effect.index, effect.call)] if isinstance(effect, RunSerial) else list(effect.items)
            results = []
            for index, call in items:
                kind = data.draw(st.sampled_from(OUTCOMES))
                if kind == "not_run":
                    err = AbortedToolCallError(call.id)
                    results.append(ToolFinished(index, ToolError(error=str(err), kind="not_run"),
                                                0.0, False, err))
                    aborted_batch = True
                    expected_rejections += 1
                    continue
                ran += 1
                ran_by_name[call.name] = ran_by_name.get(call.name, 0) + 1
                if kind == "result":
                    outcome: Any = ToolResult(content="ok")
                elif kind == "error":
                    outcome = ToolError(error="bad")
                elif kind == "activate":
                    outcome = ToolResult(content="ok", activate_plugins=("p",))
                    if not world["flags"]["has_activate_plugins"]:
                        expected_rejections += 1
                else:
                    outcome = ToolSuspend(mode="waiting_for_reply" if kind == "wait" else "resuming_later")
                    suspended_ids.add(call.id)
                results.append(ToolFinished(index, outcome, 1.0))
            if isinstance(effect, RunSerial):
                m.tool_finished(results[0])
            else:
                m.pooled_finished(data.draw(st.permutations(results)))
        elif isinstance(effect, AcceptToolMessage):
            ordinals.append(effect.ordinal)
            m.tool_message_accepted()
        elif isinstance(effect, Settle):
            choice = data.draw(st.sampled_from(["none", "answer", "answer_user", "user", "stop"]))
            msgs: list[Any] = []
            open_ids = [s.tool_call_id for s in state.open_suspends]
            if choice in ("answer", "answer_user") and open_ids:
                msgs.append(ToolMessage(tool_call_id=open_ids[0], content="answer"))
            if choice in ("answer_user", "user"):
                msgs.append(UserMessage(content="more"))
                if len(open_ids) > (1 if choice == "answer_user" else 0):
                    expected_rejections += 1
            m.settled(StepSettlement(messages=tuple(msgs), stop=choice == "stop"))
        elif isinstance(effect, Boundary):
            boundaries += 1
            # a settled boundary: nothing pending, nothing suspended
            assert not state.open_suspends
            m.boundary_decided(data.draw(st.integers(0, 7)) == 0)
        elif isinstance(effect, AskNudge):
            m.nudged([UserMessage(content="nudge")] if data.draw(st.booleans()) else None)
        elif isinstance(effect, Reject):
            rejections += 1
        elif isinstance(effect, (Activate, NotifyAssistant, NotifyProgress)):
            pass
        else:
            assert isinstance(effect, Finish)
            stop_reason = effect.stop_reason
            break
    else:  # pragma: no cover
        raise AssertionError("the machine did not finish")
    if ordinals:
        batch_ordinals.append(ordinals)

    # -- stats fold exactly; state is seed + this invocation --
    s = m.stats
    assert s.turns == turns <= world["max_iterations"]
    assert s.tool_calls == ran
    assert s.input_tokens == usage_in + aux_in and s.output_tokens == usage_out
    assert s.cost == cost + aux_cost
    assert state.input_tokens == world["seed_tokens"] + s.input_tokens
    assert state.cost == world["seed_cost"] + s.cost
    assert state.tool_calls == 3 + requested
    assert rejections == expected_rejections
    # timings: every model call took 2 ms, every applied compaction 1 ms, every tool that ran 1 ms
    assert s.model_ms == 2.0 * turns + 1.0 * compactions
    assert s.tool_ms == 1.0 * ran
    assert {k: v.calls for k, v in s.tools.items()} == ran_by_name
    assert all(v.ms == float(v.calls) for v in s.tools.values())
    if not world["flags"]["has_control"]:
        assert boundaries == 0 and stop_reason != "checkpointed"

    # -- ordinals are dense per batch --
    for batch in batch_ordinals:
        assert batch == list(range(len(batch)))

    # -- transcript shape: every call answered exactly once, contiguously, in model order --
    msgs = state.messages
    open_ids = {o.tool_call_id for o in state.open_suspends}
    last_call_index = max((i for i, x in enumerate(msgs)
                           if isinstance(x, AssistantMessage) and x.tool_calls), default=-1)
    i = 0
    while i < len(msgs):
        msg = msgs[i]
        i += 1
        if not isinstance(msg, AssistantMessage) or not msg.tool_calls:
            assert not isinstance(msg, ToolMessage), "a tool message without a request"
            continue
        ids = [c.id for c in msg.tool_calls]
        answered = []
        while i < len(msgs) and isinstance(msgs[i], ToolMessage):
            answered.append(msgs[i].tool_call_id)  # type: ignore[union-attr]
            i += 1
        assert len(answered) == len(set(answered)), "a call answered twice"
        assert set(answered) <= set(ids)
        missing = set(ids) - set(answered)
        if i - 1 >= last_call_index and missing:
            assert missing == open_ids, "an unanswered call that is not an open suspend"
        else:
            assert not missing, "a call left unanswered mid-transcript"
        batch_part = [a for a in answered if a not in suspended_ids]
        assert batch_part == [x for x in ids if x in batch_part], "results out of model order"
        # answers to suspends come after the batch's own results
        k = len(batch_part)
        assert answered[:k] == batch_part

    # -- stop reason agrees with the state --
    if stop_reason in ("waiting_for_reply", "resuming_later"):
        assert state.open_suspends
        modes = {o.mode for o in state.open_suspends}
        assert stop_reason == ("waiting_for_reply" if "waiting_for_reply" in modes
                               else "resuming_later")
    if stop_reason == "done":
        assert not state.open_suspends
    if aborted_batch:
        assert stop_reason == "aborted"
    if stop_reason == "checkpointed":
        assert not state.open_suspends
    # once finished, the machine refuses further input
    try:
        m.boundary_checked(False)
    except ProtocolError:
        pass
    else:  # pragma: no cover
        raise AssertionError("a finished machine accepted an event")


@given(st.data(), worlds())
def test_machine_invariants_hold_for_random_worlds(data: st.DataObject, world: dict[str, Any]) -> None:
    drive(data, world)


def test_out_of_order_driving_is_a_protocol_error() -> None:
    m = LoopMachine(ToolLoopState(), 3)
    m.start()
    assert isinstance(m.next_effect(), CheckBoundary)
    try:
        m.model_replied(ModelTurnResult(), 1.0)
    except ProtocolError as exc:
        assert "boundary" in str(exc)
    else:  # pragma: no cover
        raise AssertionError
    try:
        m.next_effect()
    except ProtocolError as exc:
        assert "waiting for an answer" in str(exc)
    else:  # pragma: no cover
        raise AssertionError
