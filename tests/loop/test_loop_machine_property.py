"""Hypothesis drives the pure loop machine with random worlds — turns, outcomes, suspends, aborts,
host input, nudges, compactions, the host's serial and final-call decisions — without an event
loop, and checks the loop's invariants. The machine is given no callable: every host decision is
sent to it as data."""

from __future__ import annotations

from typing import Any

import msgspec

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
from bindloop.errors import ProtocolError
from bindloop.contracts import CompactionApplied, RunStats
from bindloop.loop import LoopCounters, StepSettlement, ToolLoopState
from bindloop.lowlevel import (
    REQUEST_PHASES,
    Phase,
    SUCCESSORS,
    WIRABLE,
    AcceptToolMessage,
    Activate,
    AskNudge,
    BatchFinished,
    BatchPlanned,
    BatchWrapped,
    Boundary,
    BoundaryChecked,
    BoundaryDecided,
    CallModel,
    CheckBoundary,
    CheckFinal,
    Compact,
    Compacted,
    FinalChecked,
    Finish,
    LoopMachine,
    ModelReplied,
    NotifyAssistant,
    NotifyProgress,
    Nudged,
    PlanBatch,
    RaisedByTool,
    RanCall,
    Reject,
    RunTool,
    RunToolBatch,
    Settle,
    Settled,
    ToolMessageAccepted,
    ToolNotRun,
    ToolRaised,
    ToolReturned,
    WrapToolBatch,
    reason_exception,
    tool_exception_error,
)

NAMES = ("add", "load", "search")
OUTCOMES = ("result", "result", "result", "error", "raise", "wait", "later", "not_run", "activate")
SECRET = "password=hunter2"


@st.composite
def worlds(draw: st.DrawFn) -> dict[str, Any]:
    return {
        "max_iterations": draw(st.integers(0, 7)),
        "serial": draw(st.frozensets(st.sampled_from(NAMES))),
        "wired": draw(st.frozensets(st.sampled_from(sorted(WIRABLE)))),
        "seed_tokens": draw(st.integers(0, 1000)),
        "seed_cost": draw(st.integers(0, 100)),
    }


def drive(data: st.DataObject, world: dict[str, Any]) -> None:
    state = ToolLoopState(messages=[UserMessage(content="go")],
                          totals=RunStats(input_tokens=world["seed_tokens"], cost=world["seed_cost"]),
                          counters=LoopCounters(requested_tool_calls=3))
    serial = world["serial"]
    wired = world["wired"]
    m = LoopMachine(state, world["max_iterations"], wired=wired)
    alone: list[int] = []  # the lone calls the last plan promised, in the order they must run
    final_batch = False
    taken: set[tuple[Any, type, Any]] = set()
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
    last_turn = None

    def send(answer: Any) -> None:
        # An answer trace is plain data too: no exception object, no secret, JSON all through.
        assert SECRET not in msgspec.json.encode(answer).decode()
        before = m.phase
        m.send(answer)
        taken.add((before, type(answer), m.phase))

    m.start()
    for _ in range(500):
        effect = m.next_effect()
        # an effect trace is plain data: every request and notice encodes to JSON
        assert SECRET not in msgspec.json.encode(effect).decode()
        if type(effect) in REQUEST_PHASES:
            assert m.pending is effect, "a request is always the last effect before an answer"
            assert m.phase is REQUEST_PHASES[type(effect)]
        if isinstance(effect, CheckBoundary):
            if ordinals:
                batch_ordinals.append(ordinals)
                ordinals = []
            send(BoundaryChecked(data.draw(st.integers(0, 9)) == 0))
        elif isinstance(effect, Compact):
            if data.draw(st.booleans()):
                u = TurnUsage(input_tokens=data.draw(st.integers(0, 50)))
                aux_in += u.input_tokens
                aux_cost += 2
                compactions += 1
                # a compaction that keeps the transcript (so the structural checks still apply)
                send(Compacted(CompactionApplied(messages=tuple(state.messages), usage=u, cost=2),
                                 1.0))
            else:
                send(Compacted(None, 1.0))
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
            last_turn = turn
            final_batch = False
            send(ModelReplied(turn, 2.0))
        elif isinstance(effect, PlanBatch):
            assert "runs_serially" in wired and "run_tool_batch" not in wired
            assert effect.calls == last_turn.tool_calls  # type: ignore[union-attr]
            flags = [c.name in serial for c in effect.calls]
            alone = [i for i, flag in enumerate(flags) if flag]
            send(BatchPlanned(flags))
        elif isinstance(effect, CheckFinal):
            assert "is_final_call" in wired
            assert effect.calls == last_turn.tool_calls  # type: ignore[union-attr]
            flags = [c.name == "search" and isinstance(o, ToolResult)
                     for c, o in zip(effect.calls, effect.outcomes, strict=True)]
            final_batch = any(flags)
            send(FinalChecked(flags))
        elif isinstance(effect, (RunTool, RunToolBatch, WrapToolBatch)):
            assert isinstance(effect, WrapToolBatch) == ("run_tool_batch" in wired)
            if isinstance(effect, RunToolBatch):
                assert len(effect.items) > 1, "a single call is run alone, never pooled"
                assert not alone, "the pool started before every lone call ran"
                if "runs_serially" in wired:
                    assert not any(c.name in serial for _, c in effect.items), "a lone call pooled"
            if isinstance(effect, RunTool) and alone:
                assert effect.index == alone.pop(0), "lone calls run first, in model order"
            items = ([(effect.index, effect.call)] if isinstance(effect, RunTool)
                     else list(enumerate(effect.calls)) if isinstance(effect, WrapToolBatch)
                     else list(effect.items))
            results: list[Any] = []
            for index, call in items:
                kind = data.draw(st.sampled_from(OUTCOMES))
                if kind == "not_run":
                    results.append(ToolNotRun(index))
                    aborted_batch = True
                    expected_rejections += 1
                    continue
                ran += 1
                ran_by_name[call.name] = ran_by_name.get(call.name, 0) + 1
                if kind == "raise":
                    # What the driver sends: the tool error the model reads, never the exception.
                    results.append(ToolRaised(index, tool_exception_error(RuntimeError(SECRET)),
                                              "RuntimeError", 1.0))
                    expected_rejections += 1
                    continue
                if kind == "result":
                    outcome: Any = ToolResult(content="ok")
                elif kind == "error":
                    outcome = ToolError(error="bad")
                elif kind == "activate":
                    outcome = ToolResult(content="ok", activate_plugins=("p",))
                    if "activate" not in wired:
                        expected_rejections += 1
                else:
                    outcome = ToolSuspend(mode="waiting_for_reply" if kind == "wait" else "resuming_later")
                    suspended_ids.add(call.id)
                results.append(ToolReturned(index, outcome, 1.0))
            if isinstance(effect, RunTool):
                send(results[0])
            elif isinstance(effect, WrapToolBatch):
                # A pass-through middleware: the runner's answers are the outcomes.
                send(BatchWrapped([m.outcome_of(effect.calls[r.index], r) for r in results],
                                  [RanCall(effect.calls[r.index], r) for r in results]))
            else:
                send(BatchFinished(data.draw(st.permutations(results))))
        elif isinstance(effect, AcceptToolMessage):
            ordinals.append(effect.ordinal)
            send(ToolMessageAccepted())
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
            send(Settled(StepSettlement(messages=tuple(msgs), stop=choice == "stop")))
        elif isinstance(effect, Boundary):
            boundaries += 1
            # a settled boundary: nothing pending, nothing suspended
            assert not state.open_suspends
            send(BoundaryDecided(data.draw(st.integers(0, 7)) == 0))
        elif isinstance(effect, AskNudge):
            send(Nudged([UserMessage(content="nudge")] if data.draw(st.booleans()) else None))
        elif isinstance(effect, Reject):
            rejections += 1
            if not isinstance(effect.reason, RaisedByTool):
                assert isinstance(reason_exception(effect.tool_call_id, effect.reason),
                                  BaseException)
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
    assert state.requested_tool_calls == 3 + requested
    assert rejections == expected_rejections
    # timings: every model call took 2 ms, every applied compaction 1 ms, every tool that ran 1 ms
    assert s.model_ms == 2.0 * turns + 1.0 * compactions
    assert s.tool_ms == 1.0 * ran
    assert {k: v.calls for k, v in s.tools.items()} == ran_by_name
    assert all(v.ms == float(v.calls) for v in s.tools.values())
    # -- every transition taken is one the successor table lists --
    for before, answer, after in taken:
        assert after in SUCCESSORS[(before, answer)], (before, answer, after)
    if "on_boundary" not in wired:
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
        assert m.final_turn is last_turn is not None
        assert not last_turn.tool_calls or final_batch, "a turn with calls ended the run unasked"
    else:
        assert m.final_turn is None
    if aborted_batch:
        assert stop_reason == "aborted"
    if stop_reason == "checkpointed":
        assert not state.open_suspends
    # once finished, the machine refuses further input
    assert not any(SECRET in str(getattr(x, "content", "")) for x in state.messages)
    try:
        m.send(BoundaryChecked(False))
    except ProtocolError:
        pass
    else:  # pragma: no cover
        raise AssertionError("a finished machine accepted an event")


@given(st.data(), worlds())
def test_machine_invariants_hold_for_random_worlds(data: st.DataObject, world: dict[str, Any]) -> None:
    drive(data, world)


def test_out_of_order_driving_is_a_protocol_error_and_leaves_the_machine_in_error() -> None:
    m = LoopMachine(ToolLoopState(), 3)
    m.start()
    assert isinstance(m.next_effect(), CheckBoundary)
    try:
        m.send(ModelReplied(ModelTurnResult(), 1.0))
    except ProtocolError as exc:
        assert "does not answer CheckBoundary" in str(exc) and "BoundaryChecked" in str(exc)
    else:  # pragma: no cover
        raise AssertionError
    assert m.phase is Phase.ERROR
    try:
        m.next_effect()
    except ProtocolError as exc:
        assert "error phase after ProtocolError: ModelReplied does not answer" in str(exc)
    else:  # pragma: no cover
        raise AssertionError


def test_popping_before_answering_is_a_protocol_error_that_changes_nothing() -> None:
    m = LoopMachine(ToolLoopState(), 3)
    m.start()
    m.next_effect()
    try:
        m.next_effect()
    except ProtocolError as exc:
        assert "waiting for an answer in phase 'check_boundary'" in str(exc)
    else:  # pragma: no cover
        raise AssertionError
    m.send(BoundaryChecked(True))
    assert isinstance(m.next_effect(), Finish) and m.phase is Phase.DONE


def test_the_table_lists_every_request_once_and_only_requests() -> None:
    import typing

    from bindloop.lowlevel import Notice, Request

    requests = set(typing.get_args(Request))
    assert set(REQUEST_PHASES) == requests
    assert not requests & set(typing.get_args(Notice))
    assert len(set(REQUEST_PHASES.values())) == len(REQUEST_PHASES)
    for request, phase in REQUEST_PHASES.items():
        assert any(p is phase for p, _ in SUCCESSORS), f"{request.__name__} accepts no answer"
    waiting = set(REQUEST_PHASES.values())
    assert {p for p, _ in SUCCESSORS} == waiting
    assert set(Phase) == waiting | {Phase.IDLE, Phase.DONE, Phase.ERROR}
    for successors in SUCCESSORS.values():
        assert successors <= waiting | {Phase.DONE}


def test_an_answer_before_its_notices_are_popped_is_refused() -> None:
    def machine() -> LoopMachine:
        m = LoopMachine(ToolLoopState(messages=[UserMessage(content="go")]), 2,
                        wired=frozenset({"on_progress_update"}))
        m.start()
        m.next_effect()
        m.send(BoundaryChecked(False))
        assert isinstance(m.next_effect(), CallModel)
        m.send(ModelReplied(ModelTurnResult(tool_calls=(ToolCall(id="a", name="add"),)), 1.0))
        assert isinstance(m.pending, RunTool)
        return m

    m = machine()
    # a NotifyProgress is still queued before the RunTool; answering now would skip it
    try:
        m.send(ToolReturned(0, ToolResult(content="ok"), 1.0))
    except ProtocolError as exc:
        assert "before every effect was popped" in str(exc)
    else:  # pragma: no cover
        raise AssertionError
    assert m.phase is Phase.ERROR
    m = machine()
    assert isinstance(m.next_effect(), NotifyProgress)
    assert isinstance(m.next_effect(), RunTool)
    m.send(ToolReturned(0, ToolResult(content="ok"), 1.0))
    try:
        m.send(ToolReturned(0, ToolResult(content="ok"), 1.0))
    except ProtocolError as exc:
        assert "does not answer CheckBoundary" in str(exc) or "popped" in str(exc)
    else:  # pragma: no cover
        raise AssertionError


def test_a_raise_arrives_as_data_and_the_machine_keeps_no_exception() -> None:
    from bindloop.errors import ToolFailure

    m = LoopMachine(ToolLoopState(messages=[UserMessage(content="go")]), 2)
    m.start()
    m.next_effect()
    m.send(BoundaryChecked(False))
    m.next_effect()
    calls = (ToolCall(id="a", name="add"), ToolCall(id="b", name="load"))
    m.send(ModelReplied(ModelTurnResult(tool_calls=calls), 1.0))
    batch = m.next_effect()
    assert isinstance(batch, RunToolBatch)
    # What the driver sends for a ToolFailure and for a foreign raise (tool_exception_error's).
    m.send(BatchFinished([
        ToolRaised(1, tool_exception_error(ToolFailure("read-only", kind="rejected")),
                   "ToolFailure", 1.0),
        ToolRaised(0, tool_exception_error(ValueError(SECRET)), "ValueError", 1.0)]))
    effects = []
    while True:
        e = m.next_effect()
        effects.append(e)
        if isinstance(e, (Finish, CheckBoundary)):
            break
    rejects = [e for e in effects if isinstance(e, Reject)]
    # In the answer's order, so the driver pairs each with the exception it kept.
    assert [r.reason for r in rejects] == [RaisedByTool("ToolFailure"), RaisedByTool("ValueError")]
    assert not any(isinstance(getattr(m, name, None), BaseException)
                   for name in dir(m) if not name.startswith("__"))
    contents = [x.content for x in m.state.messages[2:]]
    assert contents == ['{"error":"ValueError: the tool failed","kind":"error"}',
                        '{"error":"read-only","kind":"rejected"}']
    assert m.stats.tool_calls == 2


def test_fatal_raises_are_judged_by_one_rule_before_the_machine() -> None:
    from bindloop.errors import PortContractError, RunCancelledError
    from bindloop.lowlevel import is_fatal_raise

    assert is_fatal_raise(RunCancelledError()) and not is_fatal_raise(KeyError("k"))
    fatal = lambda e: isinstance(e, KeyError)  # noqa: E731
    assert is_fatal_raise(RunCancelledError(), fatal) and is_fatal_raise(KeyError("k"), fatal)
    assert not is_fatal_raise(ValueError("v"), fatal)
    try:
        is_fatal_raise(ValueError("v"), lambda e: "yes")  # type: ignore[arg-type,return-value]
    except PortContractError as exc:
        assert "is_fatal_tool_error must return a bool" in str(exc)
    else:  # pragma: no cover
        raise AssertionError


def test_docs_show_the_table_the_machine_uses() -> None:
    import re
    from pathlib import Path

    text = (Path(__file__).parents[2] / "docs" / "loop.md").read_text()
    section = text.split("## Shape", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    documented = {}
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        request = re.match(r"`(\w+)", cells[0]).group(1)  # type: ignore[union-attr]
        documented[request] = set(re.findall(r"`(\w+)\(", cells[2]))
    table = {req.__name__: {a.__name__ for p, a in SUCCESSORS if p is phase}
             for req, phase in REQUEST_PHASES.items()}
    assert set(documented) == set(table)
    for request, answers in table.items():
        if request == "RunToolBatch":
            assert documented[request] == {"BatchFinished"}
        else:
            assert documented[request] == answers, request


def test_each_answer_type_answers_one_phase() -> None:
    seen: dict[type, Any] = {}
    for phase, answer in SUCCESSORS:
        assert answer not in seen, f"{answer.__name__} answers {seen[answer]} too"
        seen[answer] = phase
