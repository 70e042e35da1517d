"""The agent layer's fast paths give the same answers as the general ones they short-cut."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bindloop.agent._model import checked_model
from bindloop.schema import output_spec
from bindloop.agent._snapshot import PromptHasher, prompt_hash
from bindloop.contracts import (
    AssistantMessage,
    Message,
    ToolCall,
    ToolDefinition,
    ToolMessage,
    UserMessage,
)
from bindloop.errors import UsageError
from bindloop.tools import ToolContext
from bindloop.testing import scripted_model, scripted_stream_model
from bindloop.wire import ForcedTool

TEXT = st.text(max_size=8)
MESSAGES: st.SearchStrategy[Message] = st.one_of(
    st.builds(lambda c: UserMessage(content=c), TEXT),
    st.builds(lambda c: AssistantMessage(content=c), TEXT),
    st.builds(lambda i, a: AssistantMessage(tool_calls=(ToolCall(id=f"c{i}", name="t",
                                                                  arguments=a),)),
              st.integers(0, 9), TEXT),
    st.builds(lambda i, c: ToolMessage(tool_call_id=f"c{i}", content=c), st.integers(0, 9), TEXT),
)
# What can happen to a prompt's transcript between two model calls: the loop and the re-asks
# append; a compaction replaces the contents wholesale (in place); a resume starts a new list.
# (Editing a message in the middle in place is outside the contract: a Model must not mutate
# the transcript, and the loop never does.)
STEPS = st.lists(st.one_of(
    st.tuples(st.just("append"), st.lists(MESSAGES, max_size=3)),
    st.tuples(st.just("replace_last"), MESSAGES),
    st.tuples(st.just("replace_all"), st.lists(MESSAGES, max_size=4)),
    st.tuples(st.just("truncate"), st.integers(0, 5)),
    st.tuples(st.just("new_list"), st.lists(MESSAGES, max_size=3)),
), max_size=12)
TOOLS = (ToolDefinition(name="t", description="d", parameters={"type": "object"}),)


@settings(max_examples=150, deadline=None)
@given(st.lists(MESSAGES, min_size=1, max_size=3), STEPS,
       st.sampled_from([None, {"type": "object", "properties": {}}]),
       st.sampled_from([None, "required", ForcedTool(name="t")]))
def test_prompt_hasher_equals_prompt_hash_for_any_edit_sequence(
        first: list[Message], steps: list[Any], schema: Any, choice: Any) -> None:
    hasher = PromptHasher(TOOLS, schema, choice)
    messages = list(first)
    assert hasher(messages) == prompt_hash(messages, TOOLS, schema, choice)
    for step in steps:
        if step[0] == "append":
            messages.extend(step[1])
        elif step[0] == "replace_last" and messages:
            messages[-1] = step[1]
        elif step[0] == "replace_all":
            messages[:] = step[1]
        elif step[0] == "truncate":
            del messages[step[1]:]
        elif step[0] == "new_list":
            messages = [*messages, *step[1]]
        assert hasher(messages) == prompt_hash(messages, TOOLS, schema, choice)


class Inner(msgspec.Struct):
    n: int
    tag: str | None = None


class Answer(msgspec.Struct):
    city: str
    high: int
    note: str = "none"           # optional, refuses null: the strict form's null means absent
    maybe: str | None = None     # optional, accepts null
    items: list[Inner] = []
    kind: int | str = 0


VALUES = st.fixed_dictionaries(
    {"city": TEXT, "high": st.one_of(st.integers(-100, 100), st.integers(), st.floats(
        allow_nan=False), TEXT)},
    optional={"note": st.one_of(st.none(), TEXT), "maybe": st.one_of(st.none(), TEXT),
              "items": st.lists(st.fixed_dictionaries(
                  {"n": st.integers(0, 9)}, optional={"tag": st.one_of(st.none(), TEXT)}),
                  max_size=2),
              "kind": st.one_of(st.none(), st.integers(0, 9), TEXT)})


def _outcome(spec: Any, text: str) -> Any:
    try:
        return ("ok", spec.decode(text))
    except Exception as exc:
        return ("error", type(exc).__name__, str(exc))


@settings(max_examples=300, deadline=None)
@given(VALUES)
def test_typed_decode_fast_path_equals_the_general_path(value: dict[str, Any]) -> None:
    fast = output_spec(Answer)
    general = output_spec(Answer)
    general._decoder = None  # force JSON -> builtins -> drop synthetic nulls -> convert
    text = msgspec.json.encode(value).decode()
    assert _outcome(fast, text) == _outcome(general, text)


def test_decode_falls_back_for_a_synthetic_null() -> None:
    spec = output_spec(Answer)
    assert spec.decode('{"city": "x", "high": 1, "note": null, "maybe": null, "items": [], '
                       '"kind": 0}') == Answer(city="x", high=1)


class _Duck:
    id = "duck"
    provider = None
    structured_output = "tool"

    def price(self, usage: Any) -> int:
        return 0

    def stream(self, messages: Any, request: Any) -> Any:
        raise NotImplementedError

    def complete(self, messages: Any, request: Any, on_event: Any = None,
                 on_reset: Any = None) -> Any:
        raise NotImplementedError


class _StreamOnly:  # what an agent model was before capabilities were declared
    id = "bare"

    def stream(self, messages: Any, options: Any) -> Any:
        raise NotImplementedError


class _NoComplete(_Duck):
    complete = None  # type: ignore[assignment]


@pytest.mark.parametrize("obj", [_Duck(), _StreamOnly(), _NoComplete(), object(),
                                 scripted_stream_model([]), scripted_model([])])
def test_a_model_is_checked_once_for_every_declared_member(obj: object) -> None:
    has_all = all(getattr(obj, name, None) is not None for name in (
        "id", "structured_output", "price", "stream", "complete")) and hasattr(obj, "provider")
    if has_all:
        assert checked_model(obj, "here") is obj
    else:
        with pytest.raises(UsageError, match="here: .* is not a bindloop.model.Model"):
            checked_model(obj, "here")


def test_tool_context_is_a_frozen_value() -> None:
    ctx = ToolContext("t", "d", {}, "{}", "c1", "a")
    assert ctx == ToolContext(tool_name="t", description="d", parameters={}, input="{}",
                              call_id="c1", agent_id="a")
    with pytest.raises(AttributeError):
        ctx.call_id = "c2"  # type: ignore[misc]


class _Q(msgspec.Struct):
    q: str


class _Bus:
    def __init__(self) -> None:
        self.events: list[Any] = []

    def emit(self, event: Any) -> None:
        self.events.append(event)


@pytest.mark.anyio
@pytest.mark.parametrize("traced", [False, True])
async def test_a_tool_gets_the_same_context_on_the_plain_and_the_general_path(
        traced: bool) -> None:
    from bindloop.agent import create_agent, equip_instruction, equip_tool, prompt_chat, run_with
    from bindloop.contracts import ToolResult
    from bindloop.tools import define_tool
    from bindloop.testing import final_answer, tool_call, tool_call_turn

    seen: list[Any] = []

    async def look(args: _Q, ctx: Any) -> ToolResult:
        seen.append(ctx)
        return ToolResult(content=args.q)

    tool = define_tool(name="look", description="Look", args=_Q, execute=look)

    async def handler(_: None) -> str:
        equip_instruction("go")
        equip_tool(tool)
        return (await prompt_chat()).data

    model = scripted_stream_model([tool_call_turn([tool_call("look", {"q": "x"}, id="c7")]),
                                   final_answer("done")])
    out = await run_with(create_agent(id="seer", handler=handler), model=model,
                         event_bus=_Bus() if traced else None)
    assert out == "done"
    assert seen == [ToolContext(tool_name="look", description="Look",
                                parameters=tool.parameters, input='{"q":"x"}', call_id="c7",
                                agent_id="seer",  # a traced run's tools see its trace id
                                trace_id="0" * 31 + "1" if traced else None)]


@pytest.mark.anyio
@pytest.mark.parametrize("traced", [False, True])
async def test_a_tool_returning_no_outcome_is_named_on_the_plain_and_the_general_path(
        traced: bool) -> None:
    from bindloop.agent import create_agent, equip_instruction, equip_tool, prompt_chat, run_with
    from bindloop.errors import PortContractError
    from bindloop.tools import define_tool
    from bindloop.testing import final_answer, tool_call, tool_call_turn

    async def sloppy(args: _Q, ctx: Any) -> Any:
        return args.q  # a str, not a ToolResult

    async def handler(_: None) -> str:
        equip_instruction("go")
        equip_tool(define_tool(name="sloppy", description="S", args=_Q, execute=sloppy))
        return (await prompt_chat()).data

    model = scripted_stream_model([tool_call_turn([tool_call("sloppy", {"q": "x"}, id="c7")]),
                                   final_answer("done")])
    with pytest.raises(PortContractError, match=r"'sloppy'.*returned str|returned str.*'sloppy'"):
        await run_with(create_agent(id="a", handler=handler), model=model,
                       event_bus=_Bus() if traced else None)
