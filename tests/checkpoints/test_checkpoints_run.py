"""run_from_checkpoint: what runs, what is committed, what each invocation reports."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, get_type_hints

import anyio
import msgspec
import pytest

from bindloop import (
    AssistantMessage,
    BoundaryDecision,
    Message,
    ModelTurnResult,
    RunStats,
    ToolCall,
    ToolLoopParams,
    ToolMessage,
    ToolOutcome,
    ToolResult,
    ToolSuspend,
    TurnUsage,
    UserMessage,
    run_tool_loop,
)
from bindloop.contracts import CompactionApplied, accumulate_run
from bindloop.errors import PortContractError
from bindloop.loop import OpenSuspend
from bindloop.run import (
    ReceiptExecute,
    ReceiptReplay,
    ToolCallReceiptKey,
    decide_tool_call_receipt,
    tool_call_args_hash,
)
from bindloop.checkpoints import (
    CheckpointFormatError,
    CheckpointReply,
    LoopBindings,
    LoopCheckpoint,
    RestoredLoop,
    apply_checkpoint_input,
    create_loop_checkpoint,
    loop_state_from_checkpoint,
    parse_loop_checkpoint,
    run_from_checkpoint,
    serialize_loop_checkpoint,
)
from bindloop.testing import (
    final_answer,
    scripted_model,
    stepping_clock,
    tool_call,
    tool_call_turn,
)
from bindloop.loop import LoopHooks, ToolRunner
from bindloop.stores import MemoryToolCallReceiptStore

U = TurnUsage(input_tokens=10, output_tokens=4)


def script(n: int) -> list[ModelTurnResult]:
    return [tool_call_turn([tool_call("add", {"i": i}, id=f"c{i}")], usage=U, cost=2)
            for i in range(n)] + [final_answer("sum", usage=U, cost=1)]


async def add(call: ToolCall) -> ToolOutcome:
    return ToolResult(content=f"added {call.arguments}")


class Host:
    def __init__(self, turns: Sequence[ModelTurnResult], *, decide: Any = "continue",
                 bindings: Any = None, **ports: Any) -> None:
        self.turns = list(turns)
        self.decide = decide
        self.bindings = bindings
        self.ports = ports
        self.committed: list[LoopCheckpoint] = []
        self.restored: list[LoopCheckpoint] = []
        self.models: list[Any] = []

    def restore(self, cp: LoopCheckpoint) -> RestoredLoop:
        self.restored.append(cp)
        model = scripted_model(self.turns[cp.iterations:])
        self.models.append(model)
        capture = self.bindings or (lambda: cp.bindings)
        ports = {"now": stepping_clock(), "run_tool_call": add, **self.ports}
        rules = {k: ports.pop(k) for k in ToolRunner.PORTS if k in ports}
        hooks = {k: ports.pop(k) for k in LoopHooks.PORTS if k in ports}
        return RestoredLoop(model=model, capture_bindings=capture, runner=ToolRunner(**rules),
                            hooks=LoopHooks(**hooks), **ports)

    def commit(self, cp: LoopCheckpoint) -> Any:
        self.committed.append(cp)
        return self.decide(cp) if callable(self.decide) else self.decide

    def run(self, cp: LoopCheckpoint) -> Any:
        return anyio.run(lambda: run_from_checkpoint(checkpoint=cp, restore=self.restore,
                                                     commit=self.commit))


def start(budget: int = 10, **kw: Any) -> LoopCheckpoint:
    return create_loop_checkpoint(execution_id="e", messages=[UserMessage(content="go")],
                                  max_iterations=budget, **kw)


def test_every_settled_boundary_is_committed_one_revision_apart() -> None:
    host = Host(script(2))
    result = host.run(start())
    assert [(c.revision, c.status, c.iterations) for c in host.committed] == [
        (1, "ready", 1), (2, "ready", 2), (3, "finished", 3)]
    assert result.stop_reason == "done" and result.iterations == 3
    assert result.checkpoint is host.committed[-1]
    assert result.stats.turns == 3 and result.stats.cost == 5 and result.stats.tool_calls == 2
    assert result.cumulative_stats == result.checkpoint.stats == accumulate_run(RunStats(),
                                                                                result.stats)
    last = host.committed[-1]
    assert last.counters.requested_tool_calls == 2 and last.counters.last_prompt_tokens == 10
    assert last.messages[-1].content == "sum"
    assert result.final_turn is not None and result.final_turn.text == "sum"
    # each committed checkpoint was its own snapshot, not a view of the live state
    assert len(host.committed[0].messages) == 3 and len(last.messages) == 6


def test_checkpoint_stops_before_the_next_model_call_and_resume_keeps_the_count() -> None:
    host = Host(script(4), decide=lambda cp: "checkpoint" if cp.iterations == 2 else "continue")
    first = host.run(start(budget=4))
    assert first.stop_reason == "checkpointed" and first.iterations == 2 and first.final_turn is None
    assert host.models[0].position == 2  # no third model call
    assert first.checkpoint is host.committed[-1] and first.checkpoint.status == "ready"
    saved = serialize_loop_checkpoint(first.checkpoint)

    second = host.run(parse_loop_checkpoint(saved))
    # the execution's budget is 4: two were consumed, so two remain, whatever this invocation is
    assert second.stop_reason == "iteration_limit" and second.iterations == 2
    assert second.checkpoint.iterations == 4 and second.checkpoint.status == "iteration_limit"
    assert second.stats.turns == 2 and second.cumulative_stats.turns == 4
    assert second.cumulative_stats == accumulate_run(first.stats, second.stats)
    assert [c.revision for c in host.committed] == [1, 2, 3, 4]


@pytest.mark.parametrize(("status", "stop"), [
    ("finished", "done"), ("waiting_for_reply", "waiting_for_reply"),
    ("resuming_later", "resuming_later"), ("aborted", "aborted"),
    ("iteration_limit", "iteration_limit"),
])
def test_only_ready_checkpoints_run(status: str, stop: str) -> None:
    messages: tuple[Message, ...] = (UserMessage(content="x"),
                                     AssistantMessage(tool_calls=(ToolCall(id="s", name="ask"),)))
    suspends = ()
    if status in ("waiting_for_reply", "resuming_later"):
        suspends = (OpenSuspend(tool_call_id="s", tool_name="ask", mode=status),)  # type: ignore[assignment,arg-type]
    else:  # with nothing suspended, every call the run made was answered
        messages += (ToolMessage(tool_call_id="s", content="", name="ask"),)
    cp = LoopCheckpoint(execution_id="e", revision=2, status=status,  # type: ignore[arg-type]
                        max_iterations=1, iterations=1,
                        messages=messages, open_suspends=suspends,
                        stats=RunStats(turns=1), )
    host = Host(script(1))
    result = host.run(cp)
    assert result.stop_reason == stop and result.checkpoint == cp
    assert result.iterations == 0 and result.stats == RunStats()
    assert result.cumulative_stats == cp.stats
    assert host.restored == [] and host.committed == []


def test_a_spent_budget_ends_at_once_without_a_model_call() -> None:
    finished = Host(script(0)).run(start(budget=1)).checkpoint
    assert finished.status == "finished" and finished.iterations == 1
    more = apply_checkpoint_input(finished, UserMessage(content="again"))
    host = Host(script(0))
    result = host.run(more)
    assert result.stop_reason == "iteration_limit" and host.models[0].position == 0
    assert [c.status for c in host.committed] == ["iteration_limit"]


def test_the_answer_at_the_final_commit_is_ignored() -> None:
    host = Host(script(0), decide="checkpoint")
    result = host.run(start())
    assert result.stop_reason == "done" and result.checkpoint.status == "finished"


def test_capture_bindings_is_recorded_at_each_commit() -> None:
    seen = iter(range(100))

    async def capture() -> LoopBindings:
        return LoopBindings(config={"pin": "v1"}, environment={"snapshot": next(seen)})

    host = Host(script(2), bindings=capture)
    host.run(start(bindings=LoopBindings(config={"pin": "v1"})))
    assert [c.bindings.environment for c in host.committed] == [
        {"snapshot": 0}, {"snapshot": 1}, {"snapshot": 2}]


@pytest.mark.parametrize(("field", "value", "words"), [
    ("decide", "yes", "commit returned 'yes'"),
    ("decide", None, "commit returned None"),
    ("bindings", lambda: {"config": {}}, "capture_bindings returned dict"),
])
def test_host_ports_answering_the_wrong_type(field: str, value: Any, words: str) -> None:
    host = Host(script(1), **{field: value})
    with pytest.raises(PortContractError, match=words):
        host.run(start())


def test_capture_bindings_that_are_not_json() -> None:
    host = Host(script(1), bindings=lambda: LoopBindings(config={"x": float("nan")}))
    with pytest.raises(CheckpointFormatError) as info:
        host.run(start())
    assert info.value.field == "capture_bindings().config.x"


def test_restore_must_return_restored_loop() -> None:
    async def go() -> None:
        await run_from_checkpoint(checkpoint=start(), restore=lambda cp: object(),  # type: ignore[arg-type,return-value]
                                  commit=lambda cp: "continue")
    with pytest.raises(PortContractError, match="restore returned object"):
        anyio.run(go)


def test_an_invalid_checkpoint_does_not_run() -> None:
    bad = msgspec.structs.replace(start(), iterations=3)
    with pytest.raises(CheckpointFormatError, match="stats.turns"):
        Host(script(1)).run(bad)
    with pytest.raises(CheckpointFormatError, match="must be a LoopCheckpoint"):
        Host(script(1)).run({"version": 1})  # type: ignore[arg-type]


def test_reply_then_run_continues_the_execution() -> None:
    async def tool(call: ToolCall) -> ToolOutcome:
        return ToolSuspend(mode="waiting_for_reply") if call.name == "ask" else ToolResult(content="")

    turns = [tool_call_turn([tool_call("ask", id="q")]), final_answer("got it")]
    host = Host(turns)
    host_restore = host.restore
    host.restore = lambda cp: msgspec.structs.replace(  # type: ignore[method-assign]
        host_restore(cp), runner=ToolRunner(run_tool_call=tool))
    paused = host.run(start()).checkpoint
    assert paused.status == "waiting_for_reply"
    done = host.run(apply_checkpoint_input(paused, CheckpointReply(tool_call_id="q", content="7")))
    assert done.stop_reason == "done" and done.checkpoint.iterations == 2
    assert [type(m).__name__ for m in done.checkpoint.messages] == [
        "UserMessage", "AssistantMessage", "ToolMessage", "AssistantMessage"]


def test_a_resume_offers_compaction_again_so_the_port_must_be_idempotent() -> None:
    offers: list[int] = []

    def compact(messages: list[Message]) -> CompactionApplied | None:
        offers.append(len(messages))
        if len(messages) <= 4:
            return None
        return CompactionApplied(messages=(messages[0], UserMessage(content="summary")),
                                 usage=TurnUsage(input_tokens=3), cost=1)

    whole = Host(script(3), compact=compact)
    full = whole.run(start())
    whole_offers = list(offers)
    offers.clear()
    split = Host(script(3), compact=compact,
                 decide=lambda cp: "checkpoint" if cp.iterations == 2 else "continue")
    first = split.run(start())
    second = split.run(first.checkpoint)
    # one more offer (the resumed run's first boundary) that the threshold policy declines
    assert len(offers) == len(whole_offers) + 1
    assert serialize_loop_checkpoint(second.checkpoint) == serialize_loop_checkpoint(full.checkpoint)


def test_receipts_keep_a_replayed_span_from_repeating_a_side_effect() -> None:
    """A crash after a tool ran but before the next commit landed replays that turn on resume; a
    receipt keyed by the execution makes the replay read the recorded result instead of charging
    twice."""
    ledger: list[str] = []
    store = MemoryToolCallReceiptStore(now=stepping_clock())

    async def charge(call: ToolCall, cp: LoopCheckpoint) -> ToolOutcome:
        key = ToolCallReceiptKey(tenant_id="t", run_id=cp.execution_id, tool_name=call.name,
                                 args_hash=tool_call_args_hash(msgspec.json.decode(call.arguments)))
        decision = decide_tool_call_receipt(state=await store.read(key), effect="opaque",
                                            now=store.now)
        if isinstance(decision, ReceiptReplay):
            return ToolResult(content=decision.result)
        assert isinstance(decision, ReceiptExecute)
        assert await store.claim(key, decision.attempt, lease_ms=1000)
        ledger.append(call.arguments)
        result = f"charged {call.arguments}"
        assert await store.complete(key, decision.attempt, result)
        return ToolResult(content=result)

    turns = [tool_call_turn([tool_call("charge", {"cents": 5}, id="p1")]), final_answer("paid")]

    def restore(cp: LoopCheckpoint) -> RestoredLoop:
        return RestoredLoop(
            model=scripted_model(turns[cp.iterations:]),
            capture_bindings=lambda: cp.bindings,
            now=stepping_clock(),
            runner=ToolRunner(run_tool_call=lambda c: charge(c, cp)),
        )

    stored = [serialize_loop_checkpoint(start())]
    writes = [0]

    def commit(cp: LoopCheckpoint) -> BoundaryDecision:
        writes[0] += 1
        if writes[0] == 1:
            raise RuntimeError("power cut before the write landed")
        stored.append(serialize_loop_checkpoint(cp))
        return "continue"

    async def drive() -> Any:
        try:
            await run_from_checkpoint(checkpoint=parse_loop_checkpoint(stored[-1]),
                                      restore=restore, commit=commit)
        except RuntimeError:
            pass
        assert len(stored) == 1 and len(ledger) == 1  # charged, but the charge was never committed
        return await run_from_checkpoint(checkpoint=parse_loop_checkpoint(stored[-1]),
                                         restore=restore, commit=commit)

    result = anyio.run(drive)
    assert result.stop_reason == "done" and result.iterations == 2
    assert ledger == ['{"cents":5}']  # charged once, though the charging turn ran twice
    assert result.checkpoint.messages[2].content == 'charged {"cents":5}'


def test_restored_loop_offers_every_loop_port() -> None:
    """RestoredLoop mirrors ToolLoopParams' ports, with the loop's own types: a port added to the
    loop must be restorable, and a port type the loop changes must change here too."""
    loop_ports = {f.name for f in msgspec.structs.fields(ToolLoopParams)} - {
        "state", "max_iterations", "resume_calls"}  # the run's position, not ports
    restored = {f.name for f in msgspec.structs.fields(RestoredLoop)} - {"capture_bindings"}
    assert restored == loop_ports
    loop_hints, restored_hints = get_type_hints(ToolLoopParams), get_type_hints(RestoredLoop)
    for name in loop_ports:
        a = next(f for f in msgspec.structs.fields(ToolLoopParams) if f.name == name)
        b = next(f for f in msgspec.structs.fields(RestoredLoop) if f.name == name)
        assert a.type == b.type and a.default == b.default, name
        assert loop_hints[name] == restored_hints[name], name


# ---- the loop's output is checked before it reaches commit -------------------------------------

def test_a_clock_going_backwards_is_reported_as_the_now_port_before_any_commit() -> None:
    ticks = iter(range(1000, -1000, -7))
    host = Host(script(2), now=lambda: float(next(ticks)))
    with pytest.raises(PortContractError) as info:
        host.run(start())
    assert "now" in str(info.value) and "stats.model_ms" in str(info.value)
    assert isinstance(info.value.__cause__, CheckpointFormatError)
    assert host.committed == []


def test_negative_compaction_usage_is_reported_as_compact_before_any_commit() -> None:
    def compact(messages: list[Message]) -> CompactionApplied:
        return CompactionApplied(messages=tuple(messages), usage=TurnUsage(input_tokens=-30))

    host = Host(script(2), compact=compact)
    with pytest.raises(PortContractError) as info:
        host.run(start())
    assert "compact" in str(info.value) and "input_tokens" in str(info.value)
    assert host.committed == []


DANGLING = AssistantMessage(tool_calls=(ToolCall(id="x", name="add"),))


@pytest.mark.parametrize("port", ["on_turn_would_end", "compact"])
def test_a_port_leaving_an_unanswered_tool_call_is_named_before_its_commit(port: str) -> None:
    """The loop checks each message's shape, not the transcript's pairing; a transcript whose last
    tool call has no answer would be refused by the parser, so it never reaches ``commit``."""
    used: list[int] = []

    def nudge(turn: Any) -> list[Message] | None:
        used.append(1)
        return [DANGLING] if len(used) == 1 else None

    def compact(messages: list[Message]) -> CompactionApplied | None:
        used.append(1)
        return CompactionApplied(messages=(*messages, DANGLING)) if len(used) == 2 else None

    host = Host(script(1), **({"on_turn_would_end": nudge} if port == "on_turn_would_end"
                              else {"compact": compact}))
    with pytest.raises(PortContractError) as info:
        host.run(start())
    assert port in str(info.value) and "'x'" in str(info.value)
    assert all(DANGLING not in cp.messages for cp in host.committed)  # the bad one never reached it


def test_tool_content_that_cannot_be_stored_is_reported_as_run_tool_call() -> None:
    host = Host(script(1), run_tool_call=lambda call: ToolResult(content=5))  # type: ignore[arg-type]
    with pytest.raises(PortContractError, match="run_tool_call"):
        host.run(start())
    assert host.committed == []


@pytest.mark.parametrize("where", ["binding key", "binding value", "tool text"])
def test_a_lone_surrogate_from_a_port_never_reaches_commit(where: str) -> None:
    """Text that is not Unicode cannot be stored: a captured binding's key or value, or a tool's
    result, holding a lone surrogate is refused at the boundary, naming the field, before
    ``commit`` sees the checkpoint (found by the store instead, it would be refused there)."""
    ports: dict[str, Any] = {}
    if where == "binding key":
        ports["bindings"] = lambda: LoopBindings(config={"k\ud801": 1})
    elif where == "binding value":
        ports["bindings"] = lambda: LoopBindings(environment={"k": ["x\udc00"]})
    else:
        ports["run_tool_call"] = lambda call: ToolResult(content="half \ud800 a pair")
    host = Host(script(1), **ports)
    with pytest.raises((PortContractError, CheckpointFormatError)) as info:
        host.run(start())
    cause = info.value if isinstance(info.value, CheckpointFormatError) else info.value.__cause__
    assert isinstance(cause, CheckpointFormatError) and "surrogate" in str(cause)
    assert cause.field.startswith(
        {"binding key": "bindings.config", "binding value": "bindings.environment.k",
         "tool text": "messages[2].content"}[where]), cause.field
    assert host.committed == []


def test_every_committed_checkpoint_serializes() -> None:
    host = Host(script(3), decide=lambda cp: (serialize_loop_checkpoint(cp), "continue")[1])
    assert host.run(start()).stop_reason == "done" and len(host.committed) == 4


def test_loop_state_from_checkpoint_seeds_the_loop_where_the_checkpoint_stands() -> None:
    host = Host(script(2), decide=lambda cp: "checkpoint" if cp.iterations == 1 else "continue")
    cp = host.run(start()).checkpoint
    state = loop_state_from_checkpoint(cp)
    assert state.messages == list(cp.messages) and state.open_suspends == list(cp.open_suspends)
    assert (state.input_tokens, state.output_tokens, state.cached_input_tokens, state.cost) == (
        cp.stats.input_tokens, cp.stats.output_tokens, cp.stats.cached_input_tokens, cp.stats.cost)
    assert (state.requested_tool_calls, state.last_prompt_tokens, state.last_output_tokens,
            state.has_fresh_token_count) == (
        cp.counters.requested_tool_calls, cp.counters.last_prompt_tokens,
        cp.counters.last_output_tokens, cp.counters.has_fresh_token_count)
    state.messages.append(UserMessage(content="mine"))  # the loop mutates its state in place
    assert len(cp.messages) == 3
    # driving the loop from it ends where run_from_checkpoint does
    resumed = anyio.run(lambda: run_tool_loop(ToolLoopParams(
        state=state,
        model=scripted_model(script(2)[1:]),
        max_iterations=cp.max_iterations - cp.iterations,
        now=stepping_clock(),
        runner=ToolRunner(run_tool_call=add),
    )))
    assert resumed.stop_reason == "done" and state.requested_tool_calls == 2
    with pytest.raises(CheckpointFormatError, match="stats.turns"):
        loop_state_from_checkpoint(msgspec.structs.replace(cp, iterations=0))
