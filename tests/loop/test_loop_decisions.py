"""The host's decisions reach the loop machine as data.

``LoopMachine`` takes no callable. Which calls run alone (``runs_serially``) and which call ends the
run (``is_final_call``) are decision requests the driver answers with the predicates' values; what
the model reads for a raise arrives inside ``ToolRaised``; whether a raise is fatal is settled by
the driver before anything is sent. The first tests drive a machine by hand with data answers; the
last ones run ``run_tool_loop`` and check that every host decision is asked from the driver, never
from inside the machine.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest

from bindloop import ToolCall, ToolError, ToolMessage, ToolOutcome, ToolResult, run_tool_loop
from bindloop.contracts import ModelTurnResult, ToolSuspend, UserMessage
from bindloop.loop import BatchRunner, ToolLoopState
from bindloop.lowlevel import (
    WIRABLE, BatchFinished, BatchPlanned, CheckBoundary, CheckFinal,
    Effect, FinalChecked, Finish, LoopMachine, ModelReplied, Phase, PlanBatch, RaisedByTool,
    Reject, Request, RunTool, RunToolBatch, ToolRaised, ToolReturned, WrapToolBatch)
from bindloop.testing import final_answer, loop_harness, tool_call, tool_call_turn
from test_loop_phases import started
from bindloop.loop import LoopHooks, ToolRunner

# The machine's own modules: its handlers and its protocol half (next_effect, refusals).
MACHINE_SOURCES = {str(Path(f.__code__.co_filename).resolve())
                   for f in (LoopMachine.send, LoopMachine.next_effect)}


def at_model(*wired: str, calls: Sequence[ToolCall]) -> tuple[LoopMachine, ModelTurnResult]:
    m = started(*wired)  # waiting for the model's turn
    turn = ModelTurnResult(tool_calls=tuple(calls))
    m.send(ModelReplied(turn, 1.0))
    return m, turn


def pop_to_request(m: LoopMachine) -> tuple[list[Effect], Request | Finish]:
    notices: list[Effect] = []
    while True:
        effect = m.next_effect()
        if isinstance(effect, Finish) or effect is m.pending:
            return notices, effect  # type: ignore[return-value]
        notices.append(effect)


def test_the_machine_takes_no_callable_and_keeps_none() -> None:
    params = list(inspect.signature(LoopMachine.__init__).parameters)
    assert params == ["self", "state", "max_iterations", "wired", "resume_calls"]  # data only
    m = LoopMachine(ToolLoopState(messages=[UserMessage(content="go")]), 3, wired=WIRABLE)
    m.start()
    slots = {s for cls in type(m).__mro__ for s in getattr(cls, "__slots__", ())}
    held = {s: type(getattr(m, s)).__name__ for s in slots
            if hasattr(m, s) and callable(getattr(m, s))}
    assert held == {}


def test_serial_decisions_arrive_as_flags_and_lone_calls_run_first_in_order() -> None:
    calls = [ToolCall(id=i, name=n) for i, n in (("a", "x"), ("b", "s"), ("c", "x"), ("d", "s"))]
    m, _ = at_model("runs_serially", calls=calls)
    _, plan = pop_to_request(m)
    assert plan == PlanBatch(tuple(calls)) and m.phase is Phase.PLAN_BATCH
    m.send(BatchPlanned([False, True, False, True]))
    order = []
    _, request = pop_to_request(m)
    while isinstance(request, RunTool):
        order.append(request.index)
        m.send(ToolReturned(request.index, ToolResult(content=request.call.id), 1.0))
        _, request = pop_to_request(m)
    assert order == [1, 3]
    assert isinstance(request, RunToolBatch) and [i for i, _ in request.items] == [0, 2]
    m.send(BatchFinished([ToolReturned(2, ToolResult(content="c")),
                          ToolReturned(0, ToolResult(content="a"))]))
    _, request = pop_to_request(m)
    assert isinstance(request, CheckBoundary)
    results = [x.content for x in m.state.messages if isinstance(x, ToolMessage)]
    assert results == ["a", "b", "c", "d"]  # model order, whatever ran first


def test_no_plan_is_asked_unless_wired_or_when_the_batch_port_decides() -> None:
    calls = [ToolCall(id="a", name="s"), ToolCall(id="b", name="s")]
    m, _ = at_model(calls=calls)
    assert isinstance(pop_to_request(m)[1], RunToolBatch)
    m, _ = at_model("runs_serially", "run_tool_batch", calls=calls)
    assert isinstance(pop_to_request(m)[1], WrapToolBatch)
    # A plan with nothing alone pools; one call alone is run without a pool.
    m, _ = at_model("runs_serially", calls=calls)
    pop_to_request(m)
    m.send(BatchPlanned([False, False]))
    assert isinstance(pop_to_request(m)[1], RunToolBatch)
    m, _ = at_model("runs_serially", calls=calls[:1])
    pop_to_request(m)
    m.send(BatchPlanned([False]))
    assert isinstance(pop_to_request(m)[1], RunTool)


def test_a_short_plan_is_refused() -> None:
    m, _ = at_model("runs_serially", calls=[ToolCall(id="a", name="s"), ToolCall(id="b", name="t")])
    pop_to_request(m)
    with pytest.raises(Exception, match="BatchPlanned has 1 answers for 2 calls"):
        m.send(BatchPlanned([True]))
    assert m.phase is Phase.ERROR


@pytest.mark.parametrize(("final", "ends"), [([False, True], True), ([False, False], False)])
def test_final_decisions_arrive_as_flags_over_the_outcomes_the_transcript_gets(
        final: list[bool], ends: bool) -> None:
    calls = [ToolCall(id="a", name="x"), ToolCall(id="b", name="answer")]
    m, turn = at_model("is_final_call", calls=calls)
    assert isinstance(pop_to_request(m)[1], RunToolBatch)
    m.send(BatchFinished([ToolRaised(0, ToolError(error="x failed"), "RuntimeError", 1.0),
                          ToolReturned(1, ToolResult(content="42"), 1.0)]))
    notices, check = pop_to_request(m)
    assert [n.reason for n in notices if isinstance(n, Reject)] == [RaisedByTool("RuntimeError")]
    assert check == CheckFinal(tuple(calls), (ToolError(error="x failed"), ToolResult(content="42")))
    # Asked before any result joins the transcript.
    assert not any(isinstance(x, ToolMessage) for x in m.state.messages)
    m.send(FinalChecked(final))
    _, after = pop_to_request(m)
    if ends:
        assert after == Finish("done") and m.final_turn is turn
    else:
        assert isinstance(after, CheckBoundary) and m.final_turn is None
    assert [x.tool_call_id for x in m.state.messages if isinstance(x, ToolMessage)] == ["a", "b"]


def test_a_final_call_beside_an_open_suspend_ends_with_the_suspend() -> None:
    calls = [ToolCall(id="a", name="answer"), ToolCall(id="b", name="ask")]
    m, _ = at_model("is_final_call", calls=calls)
    pop_to_request(m)
    m.send(BatchFinished([ToolReturned(0, ToolResult(content="42")),
                          ToolReturned(1, ToolSuspend(mode="waiting_for_reply"))]))
    _, check = pop_to_request(m)
    assert isinstance(check, CheckFinal) and check.outcomes[1] == ToolSuspend(
        mode="waiting_for_reply")
    m.send(FinalChecked([True, False]))
    assert pop_to_request(m)[1] == Finish("waiting_for_reply")


# ---- the driver asks; the machine never does ---------------------------------------------------

def asked_from_outside_the_machine(log: list[str], name: str) -> None:
    log.append(name)
    inside = [f.filename for f in inspect.stack(0)
              if str(Path(f.filename).resolve()) in MACHINE_SOURCES]
    assert not inside, f"{name} was called from inside the loop machine"


def decision_ports(log: list[str]) -> dict[str, Any]:
    def runs_serially(call: ToolCall) -> bool:
        asked_from_outside_the_machine(log, "runs_serially")
        return call.name == "s"

    def is_fatal_tool_error(exc: BaseException) -> bool:
        asked_from_outside_the_machine(log, "is_fatal_tool_error")
        return False

    def format_tool_exception(exc: Exception) -> ToolError:
        asked_from_outside_the_machine(log, "format_tool_exception")
        return ToolError(error=f"formatted {type(exc).__name__}")

    def is_final_call(call: ToolCall, outcome: ToolOutcome) -> bool:
        asked_from_outside_the_machine(log, "is_final_call")
        return call.name == "answer"

    return {"runs_serially": runs_serially, "is_fatal_tool_error": is_fatal_tool_error,
            "format_tool_exception": format_tool_exception, "is_final_call": is_final_call}



def boom(args: dict[str, Any]) -> Any:
    raise RuntimeError("password=hunter2")


@pytest.mark.parametrize("wrapped", [False, True])
def test_every_host_decision_is_asked_by_the_driver(wrapped: bool) -> None:
    log: list[str] = []
    rejected: list[tuple[str, BaseException]] = []
    extra: dict[str, Any] = {}
    if wrapped:
        async def port(calls: Sequence[ToolCall], runner: BatchRunner) -> list[ToolOutcome]:
            return await runner(calls)
        extra["run_tool_batch"] = port
    h = loop_harness(
        [
            tool_call_turn([tool_call("s"), tool_call("boom"), tool_call("t")]),
            tool_call_turn([tool_call("answer"), tool_call("s")]),
            final_answer("never asked"),
        ],
        tools={"boom": boom},
        runner=ToolRunner(**decision_ports(log), **extra),
        hooks=LoopHooks(on_tool_call_rejected=lambda i, e: rejected.append((i, e))),
    )
    result = anyio.run(run_tool_loop, h.params)
    assert result.stop_reason == "done"
    assert result.final_turn is not None and result.final_turn.tool_calls[0].name == "answer"
    # Once per call per batch each, the raise judged and formatted once.
    assert sorted(log) == sorted(["runs_serially"] * 5 + ["is_final_call"] * 5
                                 + ["is_fatal_tool_error", "format_tool_exception"])
    assert h.ran[:3] == ["s", "boom", "t"] and h.ran[3:] == ["s", "answer"]
    # The host still gets the tool's own exception; the model reads only the formatted text.
    [(call_id, exc)] = rejected
    assert call_id == "call_1_1" and isinstance(exc, RuntimeError) and "hunter2" in str(exc)
    texts = [str(x.content) for x in h.state.messages if isinstance(x, ToolMessage)]
    assert '{"error":"formatted RuntimeError","kind":"error"}' in texts
    assert not any("hunter2" in t for t in texts)


def test_a_fatal_raise_never_reaches_the_machine() -> None:
    class Fatal(Exception):
        pass

    def fatal_tool(args: dict[str, Any]) -> Any:
        raise Fatal("stop")

    sent: list[str] = []
    real_send = LoopMachine.send

    def spy(self: LoopMachine, answer: Any) -> None:
        sent.append(type(answer).__name__)
        real_send(self, answer)

    h = loop_harness(
        [tool_call_turn([tool_call("f")]), final_answer("x")],
        tools={"f": fatal_tool},
        runner=ToolRunner(is_fatal_tool_error=lambda e: isinstance(e, Fatal)),
    )
    mp = pytest.MonkeyPatch()
    mp.setattr(LoopMachine, "send", spy)
    try:
        with pytest.raises(Fatal):
            anyio.run(run_tool_loop, h.params)
    finally:
        mp.undo()
    assert sent == ["BoundaryChecked", "ModelReplied"]


def test_a_raising_host_decision_propagates_from_the_driver() -> None:
    def serial(call: ToolCall) -> bool:
        raise KeyError("password=hunter2")

    h = loop_harness(
        [tool_call_turn([tool_call("a")]), final_answer("x")],
        runner=ToolRunner(runs_serially=serial),
    )
    with pytest.raises(KeyError):
        anyio.run(run_tool_loop, h.params)
    assert h.ran == []


def test_the_order_in_which_the_driver_asks_the_host() -> None:
    log: list[str] = []

    def note(name: str, value: Any = None) -> Any:
        log.append(name)
        return value

    def noted_boom(args: dict[str, Any]) -> Any:
        note("ran boom")
        return boom(args)

    h = loop_harness(
        [tool_call_turn([tool_call("s"), tool_call("boom")]), final_answer("done")],
        tools={"s": lambda a: note("ran s", ToolResult(content="ok", activate_plugins=("p",))),
               "boom": noted_boom},
        runner=ToolRunner(
            runs_serially=lambda c: note(f"runs_serially {c.name}", c.name == "s"),
            is_fatal_tool_error=lambda e: note("is_fatal_tool_error", False),
            format_tool_exception=lambda e: note("format_tool_exception", ToolError(error="failed")),
            is_final_call=lambda c, o: note(f"is_final_call {c.name}", False),
        ),
        hooks=LoopHooks(
            on_assistant_message=lambda m: note("on_assistant_message"),
            activate=lambda kind, names: note("activate"),
            on_tool_call_rejected=lambda i, e: note("on_tool_call_rejected"),
            before_tool_message_accepted=lambda m, k: note("accept"),
            on_step_settled=lambda would_end: note(f"settled {would_end}"),
        ),
    )
    assert anyio.run(run_tool_loop, h.params).stop_reason == "done"
    assert log == [
        "on_assistant_message", "runs_serially s", "runs_serially boom",
        "ran s", "activate", "ran boom", "is_fatal_tool_error", "format_tool_exception",
        "on_tool_call_rejected", "is_final_call s", "is_final_call boom", "accept", "accept",
        "settled False", "on_assistant_message", "settled True"]


def test_resumed_calls_are_planned_by_the_host_as_data_too() -> None:
    from bindloop.contracts import AssistantMessage
    from bindloop.loop import OpenSuspend

    calls = (ToolCall(id="a", name="s"), ToolCall(id="b", name="t"))
    state = ToolLoopState(
        messages=[UserMessage(content="go"), AssistantMessage(content=None, tool_calls=calls)],
        open_suspends=[OpenSuspend(tool_call_id=c.id, tool_name=c.name, mode="waiting_for_reply")
                       for c in calls])
    m = LoopMachine(state, 2, wired=frozenset({"runs_serially", "is_final_call"}),
                    resume_calls=calls)
    m.start()
    assert m.next_effect() == PlanBatch(calls) and m.phase is Phase.PLAN_BATCH
    m.send(BatchPlanned([True, False]))
    order = []
    _, request = pop_to_request(m)
    while isinstance(request, RunTool):
        order.append(request.call.id)
        m.send(ToolReturned(request.index, ToolResult(content=request.call.id)))
        _, request = pop_to_request(m)
    assert order == ["a", "b"] and isinstance(request, CheckFinal)
    m.send(FinalChecked([False, False]))
    assert isinstance(pop_to_request(m)[1], CheckBoundary) and not state.open_suspends
