"""A transcript is validated once: a run's commit checks only the messages its turn added, and a
store's encode of a committed checkpoint checks none of them again, while what is accepted, what is
refused (and how) and the bytes stored stay those of validating the whole checkpoint."""

from __future__ import annotations

import math
import sys
from typing import Any

import anyio
import msgspec
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from bindloop import AssistantMessage, SystemMessage, ToolCall, ToolMessage, UserMessage
from bindloop.checkpoints import (
    CheckpointFormatError,
    LoopBindings,
    LoopCheckpoint,
    RestoredLoop,
    create_loop_checkpoint,
    fork_loop_checkpoint,
    parse_loop_checkpoint,
    run_from_checkpoint,
    serialize_loop_checkpoint,
    validate_loop_checkpoint,
)
from bindloop.checkpoints import _codec
from bindloop.contracts import RunStats, TextPart, ToolResult, ToolTime
from bindloop.loop import ToolRunner
from bindloop.stores import MemoryCheckpointStore
from bindloop.testing import final_answer, scripted_model, tool_call, tool_call_turn
from bindloop.testing.strategies import messages as any_message, transcripts


def whole(cp: Any) -> bytes | str:
    """The reference: the stored bytes, or the refusal, of validating all of ``cp``."""
    try:
        bindings = _codec.copy_bindings(cp.bindings)
        return _codec._ENCODER.encode(_codec._validate_whole(cp, "checkpoint", bindings))
    except CheckpointFormatError as exc:
        return f"{type(exc).__name__} at {exc.field!r}: {exc}"


def stored(cp: Any, known: Any = ()) -> bytes | str:
    """What the incremental path stores or refuses for ``cp``."""
    try:
        return _codec._ENCODER.encode(_codec.require_checkpoint(cp, known=known))
    except CheckpointFormatError as exc:
        return f"{type(exc).__name__} at {exc.field!r}: {exc}"


# Hand-built messages a constructor accepts but storage must refuse or rebuild.
ODD_MESSAGES = [
    UserMessage(content=[TextPart(text="a list, where a tuple belongs")]),  # type: ignore[arg-type]
    AssistantMessage(tool_calls=[ToolCall(id="l", name="t")]),  # type: ignore[arg-type]
    UserMessage(content=(TextPart(text=5),)),  # type: ignore[arg-type]
    ToolMessage(tool_call_id="c", content="x", is_error=1),  # type: ignore[arg-type]
    AssistantMessage(tool_calls=(ToolCall(id="d", name="t", arguments={"a": 1}),)),  # type: ignore[arg-type]
    UserMessage(content="lone \ud800 surrogate"),
    {"role": "user", "content": "a dict"},
    UserMessage(content=(TextPart(text="ok"), TextPart(text=["x"]))),  # type: ignore[arg-type]
]

edits = st.sampled_from(["append", "append_odd", "replace", "replace_odd", "drop", "bindings",
                         "tools", "copy_all", "prepend", "prepend_odd", "none"])


@settings(max_examples=150, deadline=None)
@given(history=transcripts(max_turns=3), added=st.lists(any_message(), max_size=3),
       plan=st.lists(st.tuples(edits, st.integers(0, 50), st.sampled_from(ODD_MESSAGES)),
                     min_size=1, max_size=3),
       mark=st.booleans(), same=st.booleans(), pad=st.integers(0, 12))
def test_the_incremental_path_stores_and_refuses_what_whole_validation_does(
        history: list[Any], added: list[Any], plan: list[tuple[str, int, Any]], mark: bool,
        same: bool, pad: int) -> None:
    """Any checkpoint derived from a validated one (messages appended, replaced or dropped, odd or
    not; its bindings or per-tool stats mutated in place): same bytes, same error, same field."""
    history = [*(UserMessage(content=f"pad {i}") for i in range(pad)), *history]
    base = create_loop_checkpoint(execution_id="e", messages=history, max_iterations=10,
                                  bindings=LoopBindings(config={"k": [1]}))
    cp: Any = base
    messages = [*base.messages, *added]
    for action, at, odd in plan:
        k = at % (len(messages) + 1)
        if action == "append":
            messages.append(UserMessage(content=f"more {at}"))
        elif action == "append_odd":
            messages.append(odd)
        elif action == "replace" and k < len(messages) and not isinstance(messages[k], dict):
            messages[k] = msgspec.structs.replace(messages[k])  # equal, but not the same object
        elif action == "replace_odd" and k < len(messages):
            messages[k] = odd
        elif action == "copy_all":  # every message new (a compaction): checked in one call
            messages = [m if isinstance(m, dict) else msgspec.structs.replace(m) for m in messages]
        elif action == "drop" and k < len(messages):
            del messages[k]
        elif action == "prepend":  # a system prompt put before the known transcript
            messages.insert(0, SystemMessage(content=f"system {at}"))
        elif action == "prepend_odd":
            messages.insert(0, odd)
        elif action == "bindings":  # NaN, a number, or text that is not Unicode (value or key)
            if at % 4 == 3:
                base.bindings.config["key \udc00"] = at
            else:
                base.bindings.config["k"].append((math.nan, at, "lone \ud800")[at % 4 % 3])
        elif action == "tools":
            base.stats.tools["t"] = ToolTime(calls=at % 3, ms=1.0) if at % 2 else "odd"  # type: ignore[assignment]
    if not same:  # else: the validated checkpoint itself, its bindings or stats changed in place
        cp = msgspec.structs.replace(base, messages=tuple(messages))
    event("a new messages tuple" if cp is not base else "the validated checkpoint itself")
    reference = whole(cp)
    event("refused" if isinstance(reference, str) else "stored")
    assert stored(cp, known=base.messages if mark else ()) == reference
    assert stored(cp) == reference


def test_a_message_that_can_change_is_validated_again_at_each_commit() -> None:
    """A list inside a message is accepted (rebuilt as a tuple), so the caller's message is not
    trusted: a later change to that list is seen by the next validation."""
    parts = [TextPart(text="fine")]
    held = UserMessage(content=parts)  # type: ignore[arg-type]
    first = create_loop_checkpoint(execution_id="e", messages=[held], max_iterations=3)
    assert first.messages[0] is not held and first.messages[0].content == (TextPart(text="fine"),)
    parts.append(TextPart(text=7))  # type: ignore[arg-type]
    later = msgspec.structs.replace(first, messages=(held,))
    with pytest.raises(CheckpointFormatError) as info:
        _codec.require_checkpoint(later, known=first.messages)
    assert info.value.field == "messages[0].content[1].text"


def test_a_validated_checkpoint_whose_messages_were_swapped_is_validated_again() -> None:
    cp = create_loop_checkpoint(execution_id="e", messages=[UserMessage(content="q")],
                                max_iterations=3)
    bad = (UserMessage(content=(TextPart(text=1),)),)  # type: ignore[arg-type]
    msgspec.structs.force_setattr(cp, "messages", bad)
    with pytest.raises(CheckpointFormatError) as info:
        serialize_loop_checkpoint(cp)
    assert info.value.field == "messages[0].content[0].text"


@pytest.mark.parametrize(("field", "value"), [("iterations", 99), ("revision", -1),
                                             ("open_suspends", ("x",)), ("counters", None)])
def test_a_validated_checkpoint_with_any_field_swapped_is_validated_again(
        field: str, value: Any) -> None:
    cp = create_loop_checkpoint(execution_id="e", messages=[UserMessage(content="q")],
                                max_iterations=3)
    msgspec.structs.force_setattr(cp, field, value)
    with pytest.raises(CheckpointFormatError) as info:
        serialize_loop_checkpoint(cp)
    assert info.value.field.startswith(field) and stored(cp) == whole(cp)


def test_bindings_changed_after_validation_are_refused_by_the_store() -> None:
    cp = create_loop_checkpoint(execution_id="e", messages=[UserMessage(content="q")],
                                max_iterations=3, bindings=LoopBindings(config={"n": 1}))
    cp.bindings.config["n"] = math.inf

    async def save() -> None:
        await MemoryCheckpointStore().save(cp)

    with pytest.raises(CheckpointFormatError) as info:
        anyio.run(save)
    assert info.value.field == "bindings.config.n"


def test_the_mark_is_not_a_field() -> None:
    """Equality, bytes, pickling and replace ignore the mark; a replaced checkpoint has none."""
    import pickle

    made = create_loop_checkpoint(execution_id="e", messages=[UserMessage(content="q")],
                                  max_iterations=3)
    plain = LoopCheckpoint(execution_id="e", revision=0, status="ready", max_iterations=3,
                           iterations=0, messages=(UserMessage(content="q"),))
    assert made.__dict__ and not plain.__dict__
    assert made == plain
    assert serialize_loop_checkpoint(made) == serialize_loop_checkpoint(plain)
    assert msgspec.to_builtins(made) == msgspec.to_builtins(plain)
    assert not pickle.loads(pickle.dumps(made)).__dict__
    assert not msgspec.structs.replace(made, revision=1).__dict__
    assert parse_loop_checkpoint(serialize_loop_checkpoint(made)).__dict__


# ---- a commit validates its transcript once ---------------------------------------------------

class Counting:
    """Counts what the checkpoint codec validates: whole checkpoints that hold messages (what it
    asks ``msgspec.to_builtins`` to rebuild), batches of new messages (``_convert_messages``), and
    messages by identity, in a batch or in a whole checkpoint. ``install`` puts it in place."""

    def __init__(self) -> None:
        self.whole = 0
        self.batches = 0
        self.messages: dict[int, int] = {}
        self.real = msgspec.to_builtins
        self.real_batch = _codec._convert_messages

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(msgspec, "to_builtins", self)
        monkeypatch.setattr(_codec, "_convert_messages", self.batch)

    def _seen(self, messages: Any) -> None:
        for m in messages:
            self.messages[id(m)] = self.messages.get(id(m), 0) + 1

    def batch(self, messages: tuple[Any, ...]) -> Any:
        self.batches += 1
        self._seen(messages)
        return self.real_batch(messages)

    def __call__(self, value: Any, *args: Any, **kwargs: Any) -> Any:
        if sys._getframe(1).f_globals.get("__name__") != _codec.__name__:
            return self.real(value, *args, **kwargs)
        if isinstance(value, LoopCheckpoint) and value.messages:
            self.whole += 1
            self._seen(value.messages)  # each of them validated too
        elif isinstance(value, (SystemMessage, UserMessage, AssistantMessage, ToolMessage)):
            self._seen((value,))
        return self.real(value, *args, **kwargs)


@pytest.mark.parametrize("history", [1, 40])
def test_a_run_validates_each_new_message_once_and_the_store_none(
        history: int, monkeypatch: pytest.MonkeyPatch) -> None:
    store = MemoryCheckpointStore()
    turns = [tool_call_turn([tool_call("add", {"i": i}, id=f"c{i}")]) for i in range(4)]
    script = [*turns, final_answer("sum")]
    past: list[Any] = [UserMessage(content="go")]
    for i in range(history // 2):
        past += [AssistantMessage(tool_calls=(ToolCall(id=f"h{i}", name="add"),)),
                 ToolMessage(tool_call_id=f"h{i}", content="ok")]
    first = create_loop_checkpoint(execution_id="e", messages=past, max_iterations=10)

    def restore(cp: LoopCheckpoint) -> RestoredLoop:
        return RestoredLoop(model=scripted_model(script), capture_bindings=lambda: cp.bindings,
                            runner=ToolRunner(run_tool_call=lambda call: ToolResult(content="added")))

    async def main() -> Any:
        await store.save(first)
        loaded = await store.load("e")
        assert loaded is not None
        counting = Counting()
        counting.install(monkeypatch)
        result = await run_from_checkpoint(checkpoint=loaded, restore=restore, commit=store.commit)
        monkeypatch.undo()
        return counting, loaded, result

    counting, loaded, result = anyio.run(main)
    assert result.stop_reason == "done" and result.checkpoint.revision == 5
    assert store.rows["e"][0] == 5
    assert counting.whole == 0  # no commit (driver or store) rebuilt a whole checkpoint
    added = len(result.checkpoint.messages) - len(loaded.messages)
    assert added == 2 * len(turns) + 1
    # every message the run added was checked exactly once; none of the loaded ones again
    assert sorted(counting.messages.values()) == [1] * added
    assert not any(id(m) in counting.messages for m in loaded.messages)
    assert parse_loop_checkpoint(store.rows["e"][1]) == result.checkpoint


def test_a_fork_does_not_validate_the_source_transcript_again(
        monkeypatch: pytest.MonkeyPatch) -> None:
    source = create_loop_checkpoint(execution_id="e", messages=[UserMessage(content="q")] * 5,
                                    max_iterations=3)
    counting = Counting()
    counting.install(monkeypatch)
    fork = fork_loop_checkpoint(source, execution_id="f")
    serialize_loop_checkpoint(fork)
    monkeypatch.undo()
    assert counting.whole == 0 and counting.messages == {}
    assert fork.messages is source.messages


numbers = st.one_of(st.integers(0, 5), st.floats(0, 9), st.integers(-2, 5),
                    st.floats(allow_nan=True, allow_infinity=True), st.booleans(), st.just(-0.0),
                    st.just(2**70))


@settings(max_examples=300, deadline=None)
@given(counts=st.lists(st.integers(0, 9), min_size=8, max_size=8),
       times=st.lists(st.floats(0, 9) | st.integers(0, 9), min_size=2, max_size=2),
       spoil=st.lists(st.tuples(st.integers(0, 9), numbers), max_size=2),
       tools=st.dictionaries(st.text(max_size=3), st.tuples(numbers, numbers), max_size=3),
       consistent=st.booleans())
def test_the_quick_stats_check_accepts_exactly_what_the_named_checks_accept(
        counts: list[Any], times: list[Any], spoil: list[tuple[int, Any]],
        tools: dict[str, tuple[Any, Any]], consistent: bool) -> None:
    names = ("turns", "tool_calls", "input_tokens", "output_tokens", "cached_input_tokens",
             "reasoning_tokens", "cache_write_tokens", "cost", "model_ms", "tool_ms")
    values = dict(zip(names, [*counts, *times]))
    for at, value in spoil:
        values[names[at]] = value
    if consistent and all(type(c) is int for c, _ in tools.values()):
        values["tool_calls"] = sum(c for c, _ in tools.values())
    stats = RunStats(**values, tools={k: ToolTime(calls=c, ms=m) for k, (c, m) in tools.items()})
    try:
        _codec._name_stats_problem(stats, "stats")
        accepted = True
    except CheckpointFormatError:
        accepted = False
    event(f"named checks {'accept' if accepted else 'refuse'}")
    plain_types = (all(type(values[n]) is int for n in names[:8])
                   and all(type(values[n]) in (int, float) for n in names[8:])
                   and all(type(c) is int and type(m) in (int, float) for c, m in tools.values()))
    # the quick check never accepts what the named checks refuse, and takes every plain value
    assert _codec._plain_stats(stats) == (accepted and plain_types)


# Values a host can put in a validated checkpoint's dicts afterwards: JSON, and what is not JSON
# but encodes to the same bytes as JSON does (NaN and infinities as null, a set or a tuple as an
# array, bytes as a string).
odd_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.just(2**70),
              st.floats(allow_nan=True, allow_infinity=True), st.just(-0.0),
              st.text(max_size=3), st.just("lone \ud800"), st.binary(max_size=3),
              st.frozensets(st.integers(0, 3), max_size=2)),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.tuples(inner, inner),
                            st.dictionaries(st.one_of(st.text(max_size=2), st.integers(0, 2)),
                                            inner, max_size=3)),
    max_leaves=6)


@settings(max_examples=300, deadline=None)
@given(before=st.dictionaries(st.text(max_size=2), st.one_of(st.none(), st.integers(0, 3),
                                                             st.lists(st.integers(0, 3))),
                              max_size=2),
       config=st.lists(st.tuples(st.text(max_size=2), odd_values), max_size=2),
       environment=st.lists(st.tuples(st.text(max_size=2), odd_values), max_size=1),
       tools=st.lists(st.tuples(st.sampled_from(["add", "x"]), numbers, numbers), max_size=2))
def test_a_validated_checkpoint_changed_afterwards_is_stored_as_whole_validation_would(
        before: dict[str, Any], config: list[tuple[str, Any]],
        environment: list[tuple[str, Any]], tools: list[tuple[str, Any, Any]]) -> None:
    """``serialize_loop_checkpoint`` writes a checkpoint validated before without checking it again
    when nothing can have made it invalid; whatever a host changed in its dicts since, it stores or
    refuses exactly what validating the whole checkpoint does."""
    cp = create_loop_checkpoint(
        execution_id="e", messages=[UserMessage(content="q")], max_iterations=3,
        bindings=LoopBindings(config=before, environment=dict(before)))
    cp = msgspec.structs.replace(cp, stats=RunStats(tool_calls=0, tools={}))
    cp = _codec.require_checkpoint(cp)  # validated, its dicts the checkpoint's own
    for key, value in config:
        cp.bindings.config[key] = value
    for key, value in environment:
        cp.bindings.environment[key] = value
    for name, calls, ms in tools:
        cp.stats.tools[name] = ToolTime(calls=calls, ms=ms)
    event("changed" if config or environment or tools else "unchanged")
    try:
        got: bytes | str = serialize_loop_checkpoint(cp)
    except CheckpointFormatError as exc:
        got = f"{type(exc).__name__} at {exc.field!r}: {exc}"
    assert got == whole(cp)


def test_applied_input_is_checked_as_storage_would_and_not_checked_again(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from bindloop.checkpoints import apply_checkpoint_input

    done = parse_loop_checkpoint(serialize_loop_checkpoint(msgspec.structs.replace(
        create_loop_checkpoint(execution_id="e", messages=[UserMessage(content="q")] * 9,
                               max_iterations=3), status="finished")))  # as a store loads it
    with pytest.raises(CheckpointFormatError) as info:
        apply_checkpoint_input(done, UserMessage(content="lone \ud800"))
    assert info.value.field == "messages[9].content"
    counting = Counting()
    counting.install(monkeypatch)
    applied = apply_checkpoint_input(done, UserMessage(content="next"))
    body = serialize_loop_checkpoint(applied)
    monkeypatch.undo()
    assert counting.whole == 0 and sum(counting.messages.values()) == 1  # the new message, once
    assert parse_loop_checkpoint(body) == applied and applied.messages[-1].content == "next"


def test_many_new_messages_are_checked_together_and_kept_when_immutable(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A compaction replaces most of a transcript: its new messages are checked in one call, the
    immutable ones kept as they are (so the next commit knows them) and one holding a list copied."""
    base = create_loop_checkpoint(execution_id="e", messages=[UserMessage(content="q")] * 3,
                                  max_iterations=3)
    fresh = [UserMessage(content=f"summary {i}") for i in range(12)]
    listed = UserMessage(content=[TextPart(text="a list")])  # type: ignore[arg-type]
    compacted = msgspec.structs.replace(base, messages=(*fresh, listed))
    counting = Counting()
    counting.install(monkeypatch)
    clean = _codec.require_checkpoint(compacted, known=base.messages)
    monkeypatch.undo()
    assert counting.whole == 0 and counting.batches == 1  # one call over a tuple of them
    assert sorted(counting.messages.values()) == [1] * 13
    assert all(a is b for a, b in zip(clean.messages, fresh))
    assert clean.messages[-1] is not listed and clean.messages[-1].content == (TextPart(text="a list"),)
    assert serialize_loop_checkpoint(clean) == whole(compacted)


# ---- validate_loop_checkpoint: a host's per-turn checkpoint ----------------------------------

def test_validate_with_the_previous_checks_only_what_was_added(
        monkeypatch: pytest.MonkeyPatch) -> None:
    past = [UserMessage(content=f"m{i}") for i in range(30)]
    first = validate_loop_checkpoint(
        create_loop_checkpoint(execution_id="e", messages=past, max_iterations=3))
    added = ToolMessage(tool_call_id="t", content="late")
    nxt = msgspec.structs.replace(first, revision=1, messages=(*first.messages, added))
    counting = Counting()
    counting.install(monkeypatch)
    out = validate_loop_checkpoint(nxt, previous=first)
    monkeypatch.undo()
    assert counting.whole == 0 and list(counting.messages) == [id(added)]
    assert out == nxt and serialize_loop_checkpoint(out) == serialize_loop_checkpoint(nxt)
    # A previous this package did not return (or changed since) is ignored: all is checked.
    for untrusted in (msgspec.structs.replace(first, revision=0), nxt):
        counting = Counting()
        counting.install(monkeypatch)
        validate_loop_checkpoint(nxt, previous=untrusted)
        monkeypatch.undo()
        assert counting.messages == {id(m): 1 for m in nxt.messages}


def test_validate_refuses_what_storage_would_whatever_the_previous() -> None:
    first = validate_loop_checkpoint(
        create_loop_checkpoint(execution_id="e", messages=[UserMessage(content="q")],
                               max_iterations=3))
    bad = msgspec.structs.replace(first, messages=(*first.messages,
                                                   UserMessage(content="\ud800")))
    with pytest.raises(CheckpointFormatError) as caught:
        validate_loop_checkpoint(bad, previous=first)
    with pytest.raises(CheckpointFormatError) as whole_error:
        serialize_loop_checkpoint(bad)
    assert caught.value.field == whole_error.value.field
    with pytest.raises(CheckpointFormatError, match="previous must be a LoopCheckpoint"):
        validate_loop_checkpoint(first, previous="nope")  # type: ignore[arg-type]


def _counted_agent_run(monkeypatch: pytest.MonkeyPatch, handler: Any,
                       model: Any) -> tuple[Any, Counting]:
    """An agent's run of ``handler`` over ``model``, counting what the codec validates."""
    from bindloop.agent import create_agent

    counting = Counting()

    async def main() -> Any:
        counting.install(monkeypatch)
        try:
            return await create_agent(id="a", handler=handler, model=model)(None)
        finally:
            monkeypatch.undo()

    return anyio.run(main), counting


def test_an_agent_chat_s_saves_validate_each_message_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from bindloop.agent import equip_instruction, equip_tool, prompt_chat
    from bindloop.tools import define_tool
    from bindloop.testing import scripted_stream_model

    store = MemoryCheckpointStore()

    @define_tool
    def add(i: int) -> str:
        """Add."""
        return "added"

    model = scripted_stream_model(
        [tool_call_turn([tool_call("add", {"i": i}, id=f"c{i}")]) for i in range(5)]
        + [final_answer("sum")])

    async def handler(_: None) -> Any:
        equip_instruction("go")
        equip_tool(add)
        return await prompt_chat(on_checkpoint=store.save)

    chat, counting = _counted_agent_run(monkeypatch, handler, model)
    assert chat.checkpoint.status == "finished"
    assert store.rows[chat.checkpoint.execution_id][0] == 5  # one save per boundary after a tool round
    # the first save checks its whole transcript; every later one only the messages it added:
    # a validation keeps the given messages (equal to their checked copies) as themselves, so
    # the next save knows them
    assert counting.whole == 0 and counting.batches == 6  # one a save, each of what it added
    assert len(counting.messages) == len(chat.checkpoint.messages)
    assert all(n == 1 for n in counting.messages.values()), counting.messages


@pytest.mark.parametrize("lead", [0, 1, 3])
def test_known_messages_a_few_messages_in_are_not_checked_again(
        lead: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """A stored transcript with a system prompt (or a few messages) put before it, then the
    turn's new messages: only the leading and the new ones are checked, and the result is what
    validating the whole checkpoint gives."""
    past = [UserMessage(content=f"q{i}") if i % 2 == 0 else AssistantMessage(content=f"a{i}")
            for i in range(30)]
    stored_cp = parse_loop_checkpoint(serialize_loop_checkpoint(
        create_loop_checkpoint(execution_id="s", messages=past, max_iterations=9)))
    leading = [SystemMessage(content=f"system {i}") for i in range(lead)]
    added = [UserMessage(content="now"), AssistantMessage(content="done")]
    cp = create_loop_checkpoint(execution_id="c", messages=[UserMessage(content="x")],
                                max_iterations=9)
    cp = msgspec.structs.replace(cp, messages=(*leading, *stored_cp.messages, *added))
    counting = Counting()
    counting.install(monkeypatch)
    out = validate_loop_checkpoint(cp, previous=stored_cp)
    monkeypatch.undo()
    assert counting.whole == 0
    assert sorted(counting.messages) == sorted(id(m) for m in (*leading, *added))
    assert serialize_loop_checkpoint(out) == whole(cp)
    assert all(a is b for a, b in zip(out.messages[lead:lead + 30], stored_cp.messages))


@pytest.mark.parametrize("system", [False, True])
@pytest.mark.parametrize("own", [True, False])
def test_a_chat_over_a_stored_history_saves_what_it_added(
        system: bool, own: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """equip_history(stored.messages, source=stored): the chat's saves check the system prompt
    and what the chat added, never the stored messages; given messages that are not the source's
    own objects (equal copies), every one is checked, and the saves are the same bytes."""
    from bindloop.agent import equip_history, equip_instruction, equip_system, \
        equip_tool, prompt_chat
    from bindloop.tools import define_tool
    from bindloop.testing import scripted_stream_model

    past = [UserMessage(content=f"q{i}") if i % 2 == 0 else AssistantMessage(content=f"a{i}")
            for i in range(40)]
    stored_cp = parse_loop_checkpoint(serialize_loop_checkpoint(
        create_loop_checkpoint(execution_id="s", messages=past, max_iterations=9)))
    history = stored_cp.messages if own else tuple(msgspec.structs.replace(m) for m in past)

    @define_tool
    def add(i: int) -> str:
        """Add."""
        return "added"

    saves: list[LoopCheckpoint] = []
    model = scripted_stream_model(
        [tool_call_turn([tool_call("add", {"i": i}, id=f"c{i}")]) for i in range(2)]
        + [final_answer("sum")])

    async def handler(_: None) -> Any:
        if system:
            equip_system("be brief")
        equip_history(history, source=stored_cp)
        equip_instruction("go")
        equip_tool(add)
        return await prompt_chat(on_checkpoint=saves.append)

    chat, counting = _counted_agent_run(monkeypatch, handler, model)
    assert chat.data == "sum" and len(saves) == 3  # two tool rounds, then the finished one
    stored_ids = {id(m) for m in stored_cp.messages}
    if own:
        assert counting.whole == 0
        assert not stored_ids & set(counting.messages)
    else:  # nothing is known: the first save checks everything (whole or one by one)
        assert counting.whole == 1 or {id(m) for m in history} <= set(counting.messages)
    for cp in saves:
        assert cp.messages[int(system):int(system) + 40] == stored_cp.messages
        assert parse_loop_checkpoint(serialize_loop_checkpoint(cp)) == cp


def test_equip_history_refuses_a_source_that_is_not_a_checkpoint() -> None:
    from bindloop.agent import create_agent, equip_history
    from bindloop.errors import UsageError

    async def handler(_: None) -> None:
        equip_history([UserMessage(content="q")], source="a store key")  # type: ignore[arg-type]

    with pytest.raises(UsageError, match="source=.*LoopCheckpoint.*got str"):
        anyio.run(create_agent(id="a", handler=handler), None)


def test_a_whole_validation_keeps_the_given_messages_that_nothing_can_change() -> None:
    """Nothing known: the checkpoint is validated whole, and each message equal to its checked
    copy is kept as the very object given (so a later checkpoint of the same transcript knows it);
    one holding a list where a tuple belongs is copied. The bytes are whole validation's."""
    plain = [UserMessage(content="q"), AssistantMessage(content="a"),
             UserMessage(content=(TextPart(text="parts"),))]
    listed = UserMessage(content=[TextPart(text="a list")])  # type: ignore[arg-type]
    cp = msgspec.structs.replace(
        create_loop_checkpoint(execution_id="e", messages=[UserMessage(content="x")],
                               max_iterations=3),
        messages=(*plain, listed))
    clean = _codec.require_checkpoint(cp)
    assert all(a is b for a, b in zip(clean.messages, plain))
    assert clean.messages[-1] is not listed
    assert type(clean.messages[-1].content) is tuple
    assert serialize_loop_checkpoint(clean) == whole(cp)


def _field_types(t: Any, seen: set[Any]) -> set[str]:
    """The kinds of value a msgspec type can hold, Structs walked field by field."""
    info = msgspec.inspect.type_info(t) if not isinstance(t, msgspec.inspect.Type) else t
    kinds: set[str] = set()
    if isinstance(info, msgspec.inspect.StructType):
        if info.cls in seen:
            return kinds
        seen.add(info.cls)
        for field in info.fields:
            kinds |= _field_types(field.type, seen)
    elif isinstance(info, msgspec.inspect.UnionType):
        for member in info.types:
            kinds |= _field_types(member, seen)
    elif isinstance(info, (msgspec.inspect.TupleType, msgspec.inspect.VarTupleType)):
        members = info.item_types if isinstance(info, msgspec.inspect.TupleType) \
            else (info.item_type,)
        for member in members:
            kinds |= _field_types(member, seen)
    else:
        kinds.add(type(info).__name__)
    return kinds


def test_messages_hold_nothing_equality_could_let_through() -> None:
    """A message is kept as given when it equals its checked copy. That stands for "the same
    bytes, nothing mutable" only while messages hold no dict, list, float or untyped value
    (1 == 1.0 would keep an int where a float is stored as 1.0; a dict compares equal to a copy
    it shares nothing with): a field of such a type must change _codec._same first."""
    kinds = _field_types(_codec._MESSAGE_TUPLE, set())
    assert not kinds & {"DictType", "ListType", "FloatType", "AnyType", "SetType",
                        "FrozenSetType"}, kinds
