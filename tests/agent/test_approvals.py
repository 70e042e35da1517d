"""Approvals: ``equip_tool(needs_approval=)`` suspends the call; ``resume_chat(decisions=)`` runs an
approved call once inside the run, answers a denied one with the reason, runs an edited one with
the new arguments, and refuses a second decision (by name) without running the effect again."""

from __future__ import annotations

import hashlib
import hmac
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bindloop.agent import (
    ChatResult,
    create_agent,
    equip_instruction,
    equip_tool,
    prompt_chat,
    resume_chat,
)
from bindloop.agent.approvals import (
    ApprovalAlreadyDecidedError,
    ApprovalError,
    ApprovalTokenError,
    PendingApproval,
    approval_token,
    approve,
    deny,
    edit_arguments,
    pending_approvals,
)
from bindloop.contracts import ToolMessage, ToolResult
from bindloop.errors import UsageError
from bindloop.hosts.stores.sqlite import SqliteStore
from bindloop.tools import define_tool
from bindloop.checkpoints import CheckpointFormatError, LoopCheckpoint, parse_loop_checkpoint, \
    serialize_loop_checkpoint
from bindloop.testing import final_answer, scripted_stream_model, tool_call, tool_call_turn


class Path_(msgspec.Struct):
    path: str


def _deleter(deleted: list[str]) -> Any:
    async def delete(args: Path_, ctx: object) -> ToolResult:
        deleted.append(args.path)  # the effect that must happen at most once
        return ToolResult(content=f"deleted {args.path}")

    return define_tool(name="delete", description="Delete a file", args=Path_, execute=delete)


def _lister() -> Any:
    async def ls(args: Path_, ctx: object) -> ToolResult:
        return ToolResult(content="a b")

    return define_tool(name="ls", description="List", args=Path_, execute=ls)


def _start(tool: Any, *, needs: Any = True, **prompt: Any) -> Any:
    async def handler(props: str) -> ChatResult:
        equip_instruction(props)
        equip_tool(tool, needs_approval=needs)
        equip_tool(_lister())
        return await prompt_chat(**prompt)

    return handler


def _resume(tool: Any, cp: Any, **kw: Any) -> Any:
    async def handler(_: None) -> ChatResult:
        equip_tool(tool, needs_approval=True)
        equip_tool(_lister())
        return await resume_chat(cp, **kw)

    return handler


def _ask_delete(*paths: str) -> Any:
    return tool_call_turn([tool_call("delete", {"path": p}, id=f"d{i}")
                           for i, p in enumerate(paths)])


def _pause(store: SqliteStore, deleted: list[str], *paths: str, **prompt: Any) -> ChatResult:
    model = scripted_stream_model([_ask_delete(*paths)])
    agent = create_agent(id="files", handler=_start(_deleter(deleted),
                                                    on_checkpoint=store.save_checkpoint,
                                                    **prompt), model=model)
    return anyio.run(agent, "clean up")


def _decide(store: SqliteStore, deleted: list[str], cp: Any, *turns: Any, **kw: Any) -> ChatResult:
    model = scripted_stream_model(list(turns) or [final_answer("done")])
    agent = create_agent(id="files", model=model,
                         handler=_resume(_deleter(deleted), cp,
                                         on_checkpoint=store.save_checkpoint, **kw))
    out = anyio.run(agent, None)
    _decide.last_model = model  # type: ignore[attr-defined]
    return out


def test_the_run_suspends_with_the_pending_calls_and_on_checkpoint_sees_it(tmp_path: Path) -> None:
    deleted: list[str] = []
    saves: list[LoopCheckpoint] = []
    model = scripted_stream_model([tool_call_turn([tool_call("ls", {"path": "/"}, id="l0"),
                                                   tool_call("delete", {"path": "/tmp/x"},
                                                             id="d0")])])
    paused = anyio.run(create_agent(id="files", handler=_start(_deleter(deleted),
                                                               on_checkpoint=saves.append),
                                    model=model), "clean up")
    assert deleted == []
    assert paused.stop_reason == "waiting_for_reply"
    assert paused.approvals == (PendingApproval(call_id="d0", tool="delete",
                                                arguments='{"path":"/tmp/x"}'),)
    assert saves and saves[-1] == paused.checkpoint  # the suspend is the last save
    assert pending_approvals(paused.checkpoint) == paused.approvals
    # the unapproved tool of the same turn ran; its answer is in the transcript
    assert any(isinstance(m, ToolMessage) and m.tool_call_id == "l0"
               for m in paused.checkpoint.messages)
    stored = parse_loop_checkpoint(serialize_loop_checkpoint(paused.checkpoint))
    assert pending_approvals(stored) == paused.approvals


def test_approve_runs_the_call_once_inside_the_run(tmp_path: Path) -> None:
    deleted: list[str] = []
    with SqliteStore(tmp_path / "s.db") as store:
        paused = _pause(store, deleted, "/tmp/x")
        ident = paused.checkpoint.execution_id
        assert store.load_checkpoint(ident).status == "waiting_for_reply"
        done = _decide(store, deleted, store.load_checkpoint(ident), final_answer("gone"),
                       decisions=[approve(paused.approvals[0])])
        assert deleted == ["/tmp/x"]
        assert (done.stop_reason, done.data) == ("done", "gone")
        assert done.checkpoint is not None and done.checkpoint.status == "finished"
        assert store.load_checkpoint(ident) == done.checkpoint  # the store says finished
        sent = _decide.last_model.requests[0].messages  # type: ignore[attr-defined]
        assert sent[-1] == ToolMessage(tool_call_id="d0", content="deleted /tmp/x", name="delete")
        assert done.stats.tool_calls == 1 and done.checkpoint.stats.tool_calls == 1


def test_deny_gives_the_model_the_reason_and_runs_nothing(tmp_path: Path) -> None:
    deleted: list[str] = []
    with SqliteStore(tmp_path / "s.db") as store:
        paused = _pause(store, deleted, "/etc")
        done = _decide(store, deleted, paused.checkpoint, final_answer("ok, I will not"),
                       decisions=[deny("d0", "never touch /etc")])
        assert deleted == []
        last = _decide.last_model.requests[0].messages[-1]  # type: ignore[attr-defined]
        assert isinstance(last, ToolMessage) and last.is_error
        assert msgspec.json.decode(last.content) == {"error": "never touch /etc",
                                                     "kind": "denied"}
        assert done.data == "ok, I will not"


def test_edited_arguments_run_instead_of_the_models(tmp_path: Path) -> None:
    deleted: list[str] = []
    with SqliteStore(tmp_path / "s.db") as store:
        paused = _pause(store, deleted, "/tmp")
        _decide(store, deleted, paused.checkpoint,
                decisions=[edit_arguments("d0", {"path": "/tmp/only-this"})])
        assert deleted == ["/tmp/only-this"]


def test_a_second_decision_on_the_same_checkpoint_is_refused_and_runs_nothing(
        tmp_path: Path) -> None:
    deleted: list[str] = []
    with SqliteStore(tmp_path / "s.db") as store:
        paused = _pause(store, deleted, "/tmp/x")
        stored = serialize_loop_checkpoint(paused.checkpoint)
        _decide(store, deleted, stored, decisions=[approve("d0")])
        for again in (approve("d0"), deny("d0", "no"), edit_arguments("d0", {"path": "/"})):
            with pytest.raises(ApprovalAlreadyDecidedError) as info:
                _decide(store, deleted, stored, decisions=[again])
            assert info.value.call_ids == ("d0",)
        assert deleted == ["/tmp/x"]
        # the later checkpoint no longer has it pending: refused by name there too
        with pytest.raises(ApprovalAlreadyDecidedError):
            _decide(store, deleted, store.load_checkpoint(paused.checkpoint.execution_id),
                    decisions=[approve("d0")])
        assert deleted == ["/tmp/x"]


def test_two_pending_calls_decided_one_at_a_time(tmp_path: Path) -> None:
    deleted: list[str] = []
    with SqliteStore(tmp_path / "s.db") as store:
        paused = _pause(store, deleted, "/a", "/b")
        assert [p.call_id for p in paused.approvals] == ["d0", "d1"]
        half = _decide(store, deleted, paused.checkpoint, decisions=[approve("d1")])
        assert deleted == ["/b"] and half.stop_reason == "waiting_for_reply"
        assert [p.call_id for p in half.approvals] == ["d0"]
        assert _decide.last_model.requests == []  # type: ignore[attr-defined]
        done = _decide(store, deleted, half.checkpoint, final_answer("both handled"),
                       decisions=[deny("d0", "keep /a")])
        assert deleted == ["/b"] and done.data == "both handled"


def test_a_decision_committed_before_a_crash_is_not_run_again(tmp_path: Path) -> None:
    """The process dies after the decision is committed, before the call ran: the stored
    checkpoint lists the call as decided; resuming answers it without running it."""
    deleted: list[str] = []

    class Died(Exception):
        pass

    with SqliteStore(tmp_path / "s.db") as store:
        paused = _pause(store, deleted, "/tmp/x")

        def save_then_die(cp: LoopCheckpoint) -> None:
            store.save_checkpoint(cp)
            raise Died()

        agent = create_agent(id="files", model=scripted_stream_model([]),
                             handler=_resume(_deleter(deleted), paused.checkpoint,
                                             decisions=[approve("d0")],
                                             on_checkpoint=save_then_die))
        with pytest.raises(Died):
            anyio.run(agent, None)
        assert deleted == []
        decided = store.load_checkpoint(paused.checkpoint.execution_id)
        assert decided.approvals.decided[0].call_id == "d0"
        assert pending_approvals(decided) == ()
        with pytest.raises(ApprovalAlreadyDecidedError):
            _decide(store, deleted, decided, decisions=[approve("d0")])
        done = _decide(store, deleted, decided, final_answer("I could not confirm it"))
        assert deleted == []
        last = _decide.last_model.requests[0].messages[-1]  # type: ignore[attr-defined]
        assert isinstance(last, ToolMessage) and "may or may not" in last.content
        assert done.stop_reason == "done"


def test_a_predicate_asks_only_for_the_calls_it_names(tmp_path: Path) -> None:
    deleted: list[str] = []
    with SqliteStore(tmp_path / "s.db") as store:
        model = scripted_stream_model([_ask_delete("/tmp/a", "/etc/b"), final_answer("x")])
        agent = create_agent(id="files", model=model, handler=_start(
            _deleter(deleted), needs=lambda args: not args["path"].startswith("/tmp/"),
            on_checkpoint=store.save_checkpoint))
        paused = anyio.run(agent, "clean")
        assert deleted == ["/tmp/a"]
        assert [p.call_id for p in paused.approvals] == ["d1"]


def test_a_predicate_that_returns_no_bool_is_a_contract_error() -> None:
    from bindloop.errors import PortContractError

    model = scripted_stream_model([_ask_delete("/x")])
    agent = create_agent(id="files", model=model,
                         handler=_start(_deleter([]), needs=lambda args: "yes"))
    with pytest.raises(PortContractError, match="needs_approval"):
        anyio.run(agent, "clean")


def test_bad_uses_are_refused_by_name(tmp_path: Path) -> None:
    deleted: list[str] = []
    with SqliteStore(tmp_path / "s.db") as store:
        paused = _pause(store, deleted, "/tmp/x")
        agent = create_agent(id="files", model=scripted_stream_model([]),
                             handler=_resume(_deleter(deleted), paused.checkpoint,
                                             decisions=[approve("d0")]))
        with pytest.raises(UsageError, match="on_checkpoint"):
            anyio.run(agent, None)  # no fence: refused before anything runs
        with pytest.raises(ApprovalError, match="not waiting for approval"):
            _decide(store, deleted, paused.checkpoint, decisions=[approve("zz")])
        with pytest.raises(UsageError, match="decided twice"):
            _decide(store, deleted, paused.checkpoint,
                    decisions=[approve("d0"), deny("d0", "no")])
        with pytest.raises(UsageError, match="approval"):
            _decide(store, deleted, paused.checkpoint, reply="yes", tool_call_id="d0")
        with pytest.raises(UsageError, match="not JSON"):
            _decide(store, deleted, paused.checkpoint, decisions=[edit_arguments("d0", "{")])
        with pytest.raises(UsageError):
            deny("d0", "")
        assert deleted == []

    async def bad(_: None) -> None:
        equip_tool(_deleter([]), needs_approval="sometimes")  # type: ignore[arg-type]

    with pytest.raises(UsageError, match="needs_approval"):
        anyio.run(create_agent(id="x", handler=bad), None)


SECRET = b"server-side secret"


def test_signed_approvals_need_the_token_of_that_checkpoint(tmp_path: Path) -> None:
    deleted: list[str] = []
    with SqliteStore(tmp_path / "s.db") as store:
        paused = _pause(store, deleted, "/tmp/x", approval_secret=SECRET)
        (pending,) = paused.approvals
        cp = paused.checkpoint
        body = (b'{"arguments":"{\\"path\\":\\"/tmp/x\\"}","call_id":"d0","execution_id":'
                + f'"{cp.execution_id}","revision":{cp.revision},"tool":"delete"}}'.encode())
        assert pending.token == hmac.new(SECRET, body, hashlib.sha256).hexdigest()
        assert pending_approvals(cp, secret=SECRET) == paused.approvals
        assert pending_approvals(cp)[0].token is None  # nothing to sign with

        refused = [
            dict(decisions=[approve("d0")], approval_secret=SECRET),  # no token
            dict(decisions=[approve("d0", token="0" * 64)], approval_secret=SECRET),  # forged
            dict(decisions=[approve(pending)], approval_secret=b"another secret"),
            dict(decisions=[approve(pending)]),  # signed checkpoint, no secret to check with
            dict(decisions=[approve("d0", token=approval_token(
                SECRET, execution_id=cp.execution_id, revision=cp.revision + 1, call_id="d0",
                tool="delete", arguments=pending.arguments))], approval_secret=SECRET),
        ]
        for kw in refused:
            with pytest.raises(ApprovalTokenError):
                _decide(store, deleted, cp, **kw)
        assert deleted == []
        _decide(store, deleted, cp, decisions=[approve(pending)], approval_secret=SECRET)
        assert deleted == ["/tmp/x"]


def test_a_token_from_an_earlier_revision_is_refused(tmp_path: Path) -> None:
    deleted: list[str] = []
    with SqliteStore(tmp_path / "s.db") as store:
        paused = _pause(store, deleted, "/a", "/b", approval_secret=SECRET)
        old_d0 = paused.approvals[0]
        half = _decide(store, deleted, paused.checkpoint, decisions=[approve(paused.approvals[1])],
                       approval_secret=SECRET)
        assert half.approvals[0].token != old_d0.token
        with pytest.raises(ApprovalTokenError):
            _decide(store, deleted, half.checkpoint, decisions=[approve(old_d0)],
                    approval_secret=SECRET)
        _decide(store, deleted, half.checkpoint, decisions=[approve(half.approvals[0])],
                approval_secret=SECRET)
        assert deleted == ["/b", "/a"]


def test_a_record_naming_a_call_that_is_not_open_is_refused_on_parse(tmp_path: Path) -> None:
    deleted: list[str] = []
    with SqliteStore(tmp_path / "s.db") as store:
        paused = _pause(store, deleted, "/a")
    raw = msgspec.json.decode(serialize_loop_checkpoint(paused.checkpoint))
    raw["approvals"]["pending"] = ["nope"]
    with pytest.raises(CheckpointFormatError, match="approvals.pending"):
        parse_loop_checkpoint(msgspec.json.encode(raw))


def test_checkpoints_without_approvals_keep_their_bytes() -> None:
    saves: list[bytes] = []
    model = scripted_stream_model([final_answer("hi")])

    async def handler(_: None) -> ChatResult:
        equip_instruction("x")
        return await prompt_chat(on_checkpoint=lambda cp: saves.append(
            serialize_loop_checkpoint(cp)))

    anyio.run(create_agent(id="a", handler=handler, model=model), None)
    assert saves and all(b'"approvals"' not in s for s in saves)


_DECISION = st.tuples(st.sampled_from(["approve", "deny", "edit"]),
                      st.sampled_from(["d0", "d1", "d2"]), st.integers(0, 6))


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(steps=st.lists(_DECISION, min_size=1, max_size=8))
def test_any_sequence_of_decisions_runs_each_approved_effect_at_most_once(
        tmp_path_factory: Any, steps: list[tuple[str, str, int]]) -> None:
    """Decisions on any stored revision, in any order, repeated: each call's effect happens at
    most once, and only for a call that an accepted decision approved."""
    path = tmp_path_factory.mktemp("decisions") / "s.db"
    effects: list[str] = []
    with SqliteStore(path) as store:
        paused = _pause(store, effects, "/a", "/b", "/c")
        history = [paused.checkpoint]  # every checkpoint a decision could be made on
        approved: set[str] = set()
        for kind, call_id, pick in steps:
            cp = history[pick % len(history)]
            decision = (approve(call_id) if kind == "approve" else
                        deny(call_id, "no") if kind == "deny" else
                        edit_arguments(call_id, {"path": f"/edited/{call_id}"}))
            try:
                out = _decide(store, effects, cp, decisions=[decision])
            except ApprovalError:
                continue
            if kind != "deny":
                approved.add(call_id)
            history.append(out.checkpoint)
        ran = [e.rsplit("/", 1)[-1] for e in effects]
        names = {"a": "d0", "b": "d1", "c": "d2"}
        ran_ids = [names.get(r, r) for r in ran]
        assert len(ran_ids) == len(set(ran_ids))  # at most once each
        assert set(ran_ids) == approved


def test_a_reply_answers_the_other_suspend_and_the_approval_stays_pending(tmp_path: Path) -> None:
    from bindloop.contracts import ToolSuspend

    class Q(msgspec.Struct):
        question: str

    async def ask(args: Q, ctx: object) -> ToolSuspend:
        return ToolSuspend(mode="waiting_for_reply", detail=args.question)

    asker = define_tool(name="ask", description="Ask", args=Q, execute=ask)
    deleted: list[str] = []
    with SqliteStore(tmp_path / "s.db") as store:
        async def start(_: None) -> ChatResult:
            equip_instruction("go")
            equip_tool(_deleter(deleted), needs_approval=True)
            equip_tool(asker)
            return await prompt_chat(on_checkpoint=store.save_checkpoint)

        model = scripted_stream_model([tool_call_turn([
            tool_call("ask", {"question": "which?"}, id="q0"),
            tool_call("delete", {"path": "/x"}, id="d0")])])
        paused = anyio.run(create_agent(id="f", handler=start, model=model), None)
        assert [p.call_id for p in paused.approvals] == ["d0"]
        assert {s.tool_call_id for s in paused.checkpoint.open_suspends} == {"q0", "d0"}

        async def answer(_: None) -> ChatResult:
            equip_tool(_deleter(deleted), needs_approval=True)
            equip_tool(asker)
            return await resume_chat(paused.checkpoint, reply="/x only",
                                     on_checkpoint=store.save_checkpoint)

        model = scripted_stream_model([])
        half = anyio.run(create_agent(id="f", handler=answer, model=model), None)
        assert model.requests == [] and deleted == []
        assert half.stop_reason == "waiting_for_reply"
        assert [p.call_id for p in half.approvals] == ["d0"]
        assert half.checkpoint.revision == paused.checkpoint.revision + 1  # one save, in order
        done = _decide(store, deleted, half.checkpoint, final_answer("ok"),
                       decisions=[approve("d0")])
        assert deleted == ["/x"] and done.data == "ok"


def test_prompt_agent_suspends_with_the_pending_approval_on_its_checkpoint() -> None:
    from bindloop.agent import prompt_agent
    from bindloop.agent.errors import PromptSuspendedError

    async def handler(_: None) -> Any:
        equip_instruction("go")
        equip_tool(_deleter([]), needs_approval=True)
        return await prompt_agent(Path_)

    model = scripted_stream_model([_ask_delete("/x")])
    with pytest.raises(PromptSuspendedError) as info:
        anyio.run(create_agent(id="f", handler=handler, model=model), None)
    (pending,) = pending_approvals(info.value.checkpoint)
    assert (pending.call_id, pending.tool) == ("d0", "delete")


def test_approvals_under_a_tool_call_loop_middleware_and_a_trace(tmp_path: Path) -> None:
    """The batch port path (a tool-call-loop middleware) and a traced run gate the same way."""
    from bindloop.agent import equip_tool_call_loop_middleware, run_with
    from bindloop.agent.middleware import ToolCallLoopMiddleware

    seen: list[list[str]] = []

    async def watch(ctx: Any, calls: list[Any], next: Any) -> Any:
        seen.append([c.id for c in calls])
        return await next(calls)

    events: list[Any] = []

    class Bus:
        def emit(self, event: Any) -> None:
            events.append(event)

    deleted: list[str] = []
    with SqliteStore(tmp_path / "s.db") as store:
        async def start(_: None) -> ChatResult:
            equip_instruction("go")
            equip_tool(_deleter(deleted), needs_approval=True)
            equip_tool_call_loop_middleware(ToolCallLoopMiddleware(name="watch", handler=watch))
            return await prompt_chat(on_checkpoint=store.save_checkpoint)

        model = scripted_stream_model([_ask_delete("/x")])
        paused = anyio.run(lambda: run_with(create_agent(id="f", handler=start), model=model,
                                            initial_props=None, event_bus=Bus()))
        assert seen == [["d0"]] and deleted == [] and events
        assert [p.call_id for p in paused.approvals] == ["d0"]

        async def decide(_: None) -> ChatResult:
            equip_tool(_deleter(deleted), needs_approval=True)
            return await resume_chat(paused.checkpoint, decisions=[approve("d0")],
                                     on_checkpoint=store.save_checkpoint)

        model = scripted_stream_model([final_answer("ok")])
        done = anyio.run(lambda: run_with(create_agent(id="f", handler=decide), model=model,
                                          initial_props=None, event_bus=Bus()))
        assert deleted == ["/x"] and done.data == "ok"


# -- an approved call runs on the loop's one path ---------------------------------------------

def test_on_tool_error_sees_an_approved_calls_exception(tmp_path: Path) -> None:
    """The approved call raises: the loop formats the tool error the model reads and reports the
    exception itself through run_with(on_tool_error=), as for any other call."""
    from bindloop.agent import run_with

    class Boom(Exception):
        pass

    async def explode(args: Path_, ctx: object) -> ToolResult:
        raise Boom("disk on fire")

    tool = define_tool(name="delete", description="Delete", args=Path_, execute=explode)
    reports: list[Any] = []
    with SqliteStore(tmp_path / "s.db") as store:
        paused = _pause(store, [], "/tmp/x")
        model = scripted_stream_model([final_answer("it failed")])
        done = anyio.run(lambda: run_with(
            create_agent(id="files", handler=_resume(tool, paused.checkpoint,
                                                     decisions=[approve("d0")],
                                                     on_checkpoint=store.save_checkpoint)),
            initial_props=None, model=model, on_tool_error=reports.append))
    assert done.data == "it failed"
    assert [(r.call_id, r.tool_name, type(r.error)) for r in reports] == [("d0", "delete", Boom)]
    last = model.requests[0].messages[-1]
    assert isinstance(last, ToolMessage) and last.is_error and "disk on fire" not in last.content
    assert done.stats.tool_calls == 1  # it ran (and failed)


def _comparable(stats: Any) -> Any:
    return msgspec.structs.replace(stats, model_ms=0.0, tool_ms=0.0, tools={
        n: msgspec.structs.replace(t, ms=0.0) for n, t in stats.tools.items()})


def test_an_approved_runs_stats_are_the_ungated_runs(tmp_path: Path) -> None:
    """Gated or not, the execution counts the same turns, tokens and calls: the suspend for the
    approval runs nothing (no tool call), the approved run counts the call once; prompt_stats()
    is the ChatResult's stats."""
    from bindloop.agent import prompt_stats
    from bindloop.contracts import TurnUsage, accumulate_run

    turns = [tool_call_turn([tool_call("ls", {"path": "/"}, id="l0"),
                             tool_call("delete", {"path": "/tmp/x"}, id="d0")],
                            usage=TurnUsage(input_tokens=11, output_tokens=3), cost=2),
             final_answer("gone", usage=TurnUsage(input_tokens=17, output_tokens=5), cost=4)]
    read: list[Any] = []

    def handler(gated: bool, **kw: Any) -> Any:
        async def run(_: None) -> ChatResult:
            equip_instruction("clean up")
            equip_tool(_deleter([]), needs_approval=gated)
            equip_tool(_lister())
            out = await (prompt_chat(**kw) if "cp" not in kw else resume_chat(
                kw.pop("cp"), **kw))
            read.append(prompt_stats())
            return out

        return run

    plain = anyio.run(create_agent(id="f", model=scripted_stream_model(turns),
                                   handler=handler(False)), None)
    with SqliteStore(tmp_path / "s.db") as store:
        paused = anyio.run(create_agent(id="f", model=scripted_stream_model(turns[:1]),
                                        handler=handler(True, on_checkpoint=store.save_checkpoint)),
                           None)
        assert paused.stats.tool_calls == 1 and set(paused.stats.tools) == {"ls"}
        done = anyio.run(create_agent(id="f", model=scripted_stream_model(turns[1:]),
                                      handler=handler(True, cp=paused.checkpoint,
                                                      decisions=[approve("d0")],
                                                      on_checkpoint=store.save_checkpoint)),
                         None)
    assert read[1:] == [paused.stats, done.stats]  # prompt_stats() is the ChatResult's stats
    assert _comparable(accumulate_run(paused.stats, done.stats)) == _comparable(plain.stats)
    assert done.checkpoint is not None
    assert _comparable(done.checkpoint.stats) == _comparable(plain.stats)
    assert (done.data, [*paused.delta, *done.delta]) == (plain.data, plain.delta)


def test_an_abort_during_an_approved_call_stops_the_batch(tmp_path: Path) -> None:
    """Two approved calls of a serial tool; the first fires the run's signal: the second is not
    started (the loop answers it not_run and reports it), and the prompt ends aborted."""
    from bindloop.agent import run_with
    from bindloop.errors import AbortedToolCallError, RunCancelledError
    from bindloop.signal import AbortController

    controller = AbortController()
    ran: list[str] = []

    async def delete(args: Path_, ctx: object) -> ToolResult:
        ran.append(args.path)
        controller.abort("user pressed stop")
        return ToolResult(content="deleted")

    tool = define_tool(name="delete", description="Delete", args=Path_, execute=delete)
    reports: list[Any] = []
    with SqliteStore(tmp_path / "s.db") as store:
        paused = _pause(store, [], "/a", "/b")

        async def decide(_: None) -> ChatResult:
            equip_tool(tool, needs_approval=True, serial=True)
            return await resume_chat(paused.checkpoint, on_checkpoint=store.save_checkpoint,
                                     decisions=[approve("d0"), approve("d1")])

        model = scripted_stream_model([final_answer("never")])
        with pytest.raises(RunCancelledError):
            anyio.run(lambda: run_with(create_agent(id="files", handler=decide),
                                       initial_props=None, model=model,
                                       signal=controller.signal, on_tool_error=reports.append))
    assert ran == ["/a"] and model.requests == []
    assert [(r.call_id, type(r.error)) for r in reports] == [("d1", AbortedToolCallError)]


def test_a_middleware_sees_the_approved_batch_and_its_decisions(tmp_path: Path) -> None:
    """The resumed run's first batch is the decided calls, through the tool-call-loop middleware
    like any batch; the denied call reaches it too (answered below it, never run)."""
    from bindloop.agent import equip_tool_call_loop_middleware
    from bindloop.agent.middleware import ToolCallLoopMiddleware

    seen: list[tuple[str, ...]] = []

    async def watch(ctx: Any, calls: list[Any], next: Any) -> Any:
        seen.append(tuple(c.id for c in calls))
        return await next(calls)

    deleted: list[str] = []
    with SqliteStore(tmp_path / "s.db") as store:
        paused = _pause(store, deleted, "/a", "/b")

        async def decide(_: None) -> ChatResult:
            equip_tool(_deleter(deleted), needs_approval=True)
            equip_tool_call_loop_middleware(ToolCallLoopMiddleware(name="watch", handler=watch))
            return await resume_chat(paused.checkpoint, on_checkpoint=store.save_checkpoint,
                                     decisions=[deny("d0", "no"), approve("d1")])

        model = scripted_stream_model([final_answer("ok")])
        done = anyio.run(create_agent(id="files", handler=decide, model=model), None)
    assert seen == [("d0", "d1")] and deleted == ["/b"] and done.data == "ok"
    assert [m.tool_call_id for m in model.requests[0].messages if isinstance(m, ToolMessage)] \
        == ["d0", "d1"]  # the model's order
