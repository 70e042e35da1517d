"""prompt_agent(schema): the strict-mode converter (OpenAI's strict rules, Gemini's subset), native
JSON-schema mode vs the forced output tool, validators, re-asks and StructuredOutputError."""

from __future__ import annotations

import dataclasses
from typing import Any, Literal, TypedDict

import jsonschema
import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bindloop.agent import (
    create_agent,
    equip_instruction,
    equip_tool,
    expect_validator,
    prompt_agent,
)
from bindloop.schema import strict_json_schema
from bindloop.textstream import TURN_RESET_REASONS, TurnResetEvent, TurnTextEvent
from bindloop.contracts import ToolResult, UserMessage
from bindloop.errors import PortContractError
from bindloop.agent.errors import (
    StructuredOutputError,
    ToolLoopExceededError,
    TurnBudgetExceededError,
)
from bindloop.schema import UnsupportedSchemaError
from bindloop.tools import define_tool
from bindloop.testing import final_answer, scripted_stream_model, tool_call, tool_call_turn
from bindloop.wire import ForcedTool, gemini_schema

pytestmark = pytest.mark.anyio


class Address(msgspec.Struct):
    street: str
    zip: str | None = None


class Person(msgspec.Struct):
    name: str
    age: int = msgspec.field(default=0)
    tags: list[str] = []
    home: Address | None = None
    kind: Literal["human", "robot"] = "human"


@dataclasses.dataclass
class Point:
    x: float
    y: float = 0.0


class Movie(TypedDict):
    title: str
    year: int


class Cat(msgspec.Struct, tag="cat"):
    lives: int


class Dog(msgspec.Struct, tag="dog"):
    good: bool = True


class Node(msgspec.Struct):
    value: int
    children: list[Node] = []


OPENAI_KEYWORDS = {"type", "properties", "required", "additionalProperties", "items", "enum",
                   "const", "anyOf", "$ref", "$defs", "description", "title"}
GEMINI_KEYWORDS = {"type", "format", "title", "description", "nullable", "enum", "maxItems",
                   "minItems", "properties", "required", "minProperties", "maxProperties",
                   "minLength", "maxLength", "pattern", "example", "anyOf", "propertyOrdering",
                   "default", "items", "minimum", "maximum"}


def _walk(schema: Any) -> Any:
    if isinstance(schema, dict):
        yield schema
        for key, value in schema.items():
            if key in ("properties", "$defs"):
                for sub in value.values():
                    yield from _walk(sub)
            elif key == "items":
                yield from _walk(value)
            elif key == "anyOf":
                for sub in value:
                    yield from _walk(sub)


def assert_openai_strict(schema: dict[str, Any]) -> None:
    """OpenAI's documented strict structured-output rules."""
    jsonschema.Draft202012Validator.check_schema(schema)
    for node in _walk(schema):
        assert set(node) <= OPENAI_KEYWORDS, set(node) - OPENAI_KEYWORDS
        if node.get("type") == "object" or "properties" in node:
            assert node["additionalProperties"] is False
            assert node["required"] == list(node["properties"])


@pytest.mark.parametrize("tp", [Person, Point, Movie, list[Person], Cat | Dog, int, Node])
def test_strict_schema_follows_openai_rules(tp: Any) -> None:
    assert_openai_strict(strict_json_schema(tp))


@pytest.mark.parametrize("tp", [Person, Point, Movie, list[Person], Cat | Dog])
def test_inlined_strict_schema_fits_gemini_subset(tp: Any) -> None:
    schema = strict_json_schema(tp, inline_refs=True)
    for node in _walk(schema):
        assert "$ref" not in node and "$defs" not in node
        # additionalProperties has no Gemini form; the decoder enforces closure instead.
        assert set(node) - {"additionalProperties"} <= GEMINI_KEYWORDS
    reduced = gemini_schema(schema)
    assert reduced.get("type") in ("object", "array") or "anyOf" in reduced


def test_optional_fields_become_required_and_nullable() -> None:
    schema = strict_json_schema(Person)
    props = schema["properties"]
    assert schema["required"] == ["name", "age", "tags", "home", "kind"]
    assert props["name"] == {"type": "string"}
    assert {"type": "null"} in props["age"]["anyOf"]
    # Already nullable: not wrapped twice.
    assert props["home"]["anyOf"].count({"type": "null"}) == 1


def test_constraints_move_into_the_description() -> None:
    class Bounded(msgspec.Struct):
        n: int = msgspec.field(default=1)
        s: str = ""

    schema = strict_json_schema({"type": "object", "properties": {
        "n": {"type": "integer", "minimum": 1, "maximum": 9, "description": "A digit."},
        "s": {"type": "string", "pattern": "^a"}}, "required": ["n", "s"]})
    assert schema["properties"]["n"] == {"type": "integer",
                                         "description": "A digit. Constraints: maximum=9, "
                                                        "minimum=1."}
    assert "pattern" not in schema["properties"]["s"]
    assert_openai_strict(schema)


@pytest.mark.parametrize(("schema", "keyword"), [
    ({"type": "object", "properties": {"a": {"not": {"type": "string"}}}}, "'not'"),
    ({"type": "object", "patternProperties": {"^x": {"type": "string"}}}, "'patternProperties'"),
    ({"type": "object", "additionalProperties": {"type": "integer"}}, "additionalProperties"),
    ({"allOf": [{"type": "string"}, {"minLength": 2}]}, "allOf"),
    ({"type": "object", "properties": {"a": {"if": {"type": "string"}}}}, "'if'"),
    ({"$ref": "#/definitions/X"}, r"\$ref"),
])
def test_unsupported_json_schema_is_refused_naming_the_keyword(schema: dict[str, Any],
                                                               keyword: str) -> None:
    with pytest.raises(UnsupportedSchemaError, match=keyword):
        strict_json_schema(schema)


def test_types_msgspec_cannot_describe_are_refused() -> None:
    with pytest.raises(UnsupportedSchemaError, match="msgspec"):
        strict_json_schema(object)
    with pytest.raises(UnsupportedSchemaError, match="dict"):
        strict_json_schema(dict[str, int])
    with pytest.raises(UnsupportedSchemaError, match="recursive"):
        strict_json_schema(Node, inline_refs=True)


# -- a property: any schema tree converts to a strict schema that accepts what the original did ----

_SCALARS = st.sampled_from([{"type": "string"}, {"type": "integer"}, {"type": "boolean"},
                            {"type": "number"}, {"enum": ["a", "b"]}])


def _objects(children: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
    names = st.lists(st.sampled_from(["a", "b", "c", "d"]), unique=True, max_size=4)
    return names.flatmap(lambda keys: st.tuples(
        st.fixed_dictionaries({k: children for k in keys}),
        st.lists(st.sampled_from(keys), unique=True) if keys else st.just([]),
    ).map(lambda t: {"type": "object", "properties": t[0], "required": sorted(t[1])}))


SCHEMA_TREES = st.recursive(
    _SCALARS, lambda inner: st.one_of(
        _objects(inner), inner.map(lambda s: {"type": "array", "items": s}),
        inner.map(lambda s: {"anyOf": [s, {"type": "null"}]})), max_leaves=8)


def _instance(schema: dict[str, Any], draw: Any) -> Any:
    if "anyOf" in schema:
        return None if draw(st.booleans()) else _instance(schema["anyOf"][0], draw)
    if "enum" in schema:
        return draw(st.sampled_from(schema["enum"]))
    t = schema["type"]
    if t == "object":
        out = {}
        for key, sub in schema["properties"].items():
            if key in schema["required"] or draw(st.booleans()):
                out[key] = _instance(sub, draw)
        return out
    if t == "array":
        return [_instance(schema["items"], draw) for _ in range(draw(st.integers(0, 2)))]
    return draw({"string": st.text(max_size=3), "integer": st.integers(-5, 5),
                 "boolean": st.booleans(), "number": st.integers(-5, 5)}[t])


def _fill_nulls(value: Any, schema: dict[str, Any]) -> Any:
    """What a strict provider sends for ``value``: absent optionals as null."""
    if "anyOf" in schema:
        return None if value is None else _fill_nulls(value, schema["anyOf"][0])
    if schema.get("type") == "object":
        return {k: _fill_nulls(value[k], sub) if k in value else None
                for k, sub in schema["properties"].items()}
    if schema.get("type") == "array":
        return [_fill_nulls(v, schema["items"]) for v in value]
    return value


def _accepts_null(schema: dict[str, Any]) -> bool:
    return "anyOf" in schema and {"type": "null"} in schema["anyOf"]


def _expected(value: Any, schema: dict[str, Any]) -> Any:
    """What decoding gives back: an absent optional property that accepts null anyway cannot be
    told from an explicit null (the strict form has one shape for both), so it comes back null."""
    if "anyOf" in schema:
        return None if value is None else _expected(value, schema["anyOf"][0])
    if schema.get("type") == "object":
        return {k: _expected(value[k], sub) if k in value else None
                for k, sub in schema["properties"].items() if k in value or _accepts_null(sub)}
    if schema.get("type") == "array":
        return [_expected(v, schema["items"]) for v in value]
    return value


@settings(max_examples=80)
@given(SCHEMA_TREES, st.data())
def test_strict_form_accepts_every_instance_of_the_original(schema: dict[str, Any],
                                                            data: st.DataObject) -> None:
    from bindloop.schema import OutputSpec

    strict = strict_json_schema(schema)
    assert_openai_strict(strict) if strict.get("type") == "object" else \
        jsonschema.Draft202012Validator.check_schema(strict)
    value = _instance(schema, data.draw)
    jsonschema.validate(value, schema)
    sent = _fill_nulls(value, schema)
    jsonschema.validate(sent, strict)
    spec = OutputSpec(schema)
    text = msgspec.json.encode({"result": sent} if spec.wrapped else sent).decode()
    assert spec.decode(text) == _expected(value, schema)


# -- prompt_agent over a scripted model ------------------------------------------------------------

def _agent(model: Any, schema: Any, *, tools: Any = (), validators: Any = (),
           prompt: Any = None, **kwargs: Any) -> Any:
    async def handler(_: None) -> Any:
        equip_instruction("Who is it?")
        for tool in tools:
            equip_tool(tool)
        for v in validators:
            expect_validator(v)
        return await prompt_agent(schema, **(prompt or {}))

    return create_agent(id="p", handler=handler, model=model, **kwargs)


async def test_native_mode_sends_the_strict_schema_and_decodes_the_type() -> None:
    model = scripted_stream_model([final_answer('{"name": "Ada", "age": 36, "tags": null, '
                                                '"home": null, "kind": "human"}')])
    person = await _agent(model, Person)(None)
    assert person == Person(name="Ada", age=36)
    options = model.requests[0].request
    assert options.schema == strict_json_schema(Person)
    assert options.schema_name == "Person" and options.tool_choice is None
    assert options.tools == ()


@pytest.mark.parametrize(("schema", "text", "value"), [
    (Point, '{"x": 1.5, "y": null}', Point(x=1.5)),
    (Movie, '{"title": "Heat", "year": 1995}', {"title": "Heat", "year": 1995}),
    (list[int], '{"result": [1, 2, 3]}', [1, 2, 3]),
    (Cat | Dog, '{"result": {"type": "dog", "good": null}}', Dog()),
    (Cat | Dog, '{"result": {"type": "cat", "lives": 9}}', Cat(lives=9)),
    ({"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]},
     '{"ok": true}', {"ok": True}),
])
async def test_decodes_every_kind_of_schema(schema: Any, text: str, value: Any) -> None:
    assert await _agent(scripted_stream_model([final_answer(text)]), schema)(None) == value


async def test_tool_mode_forces_the_output_tool() -> None:
    model = scripted_stream_model(
        [tool_call_turn([tool_call("Point", {"x": 4, "y": 5})])], structured_output="tool")
    assert await _agent(model, Point)(None) == Point(x=4, y=5)
    options = model.requests[0].request
    assert options.schema is None
    assert options.tool_choice == ForcedTool(name="Point")
    assert [t.name for t in options.tools] == ["Point"]
    assert options.tools[0].parameters == strict_json_schema(Point)


class Args(msgspec.Struct):
    q: str


async def _lookup(args: Args, ctx: object) -> ToolResult:
    return ToolResult(content=f"{args.q}: 42")


LOOKUP = define_tool(name="lookup", description="Look up", args=Args, execute=_lookup)


async def test_tool_mode_with_other_tools_requires_a_tool_and_runs_them_first() -> None:
    model = scripted_stream_model([
        tool_call_turn([tool_call("lookup", {"q": "answer"})]),
        tool_call_turn([tool_call("Point", {"x": 42, "y": 0})]),
    ], structured_output="tool")
    assert await _agent(model, Point, tools=[LOOKUP])(None) == Point(x=42)
    assert model.requests[0].request.tool_choice == "required"
    assert [t.name for t in model.requests[0].request.tools] == ["lookup", "Point"]
    assert "answer: 42" in str(model.requests[1].messages[-1])


async def test_invalid_json_and_validator_refusal_are_re_asked_with_the_reason() -> None:
    model = scripted_stream_model([
        final_answer("not json"),
        final_answer('{"x": 1, "y": 1}'),
        final_answer('{"x": 10, "y": 1}'),
    ])

    def big_enough(p: Point) -> bool | str:
        return True if p.x >= 10 else f"x must be at least 10, got {p.x}"

    assert await _agent(model, Point, validators=[big_enough])(None) == Point(x=10, y=1)
    reasks = [r.messages[-1] for r in model.requests[1:]]
    assert all(isinstance(m, UserMessage) for m in reasks)
    assert "not valid JSON" in str(reasks[0].content)
    assert "x must be at least 10, got 1.0" in str(reasks[1].content)


async def test_structured_output_error_carries_every_attempt() -> None:
    model = scripted_stream_model([final_answer(f'{{"x": "{i}"}}') for i in range(3)])
    with pytest.raises(StructuredOutputError) as info:
        await _agent(model, Point, max_retries=2)(None)
    assert [raw for raw, _ in info.value.attempts] == ['{"x": "0"}', '{"x": "1"}', '{"x": "2"}']
    assert all("does not match the schema" in reason for _, reason in info.value.attempts)
    assert model.position == 3


async def test_a_raising_validator_is_a_failed_attempt_and_a_bad_return_is_a_usage_error() -> None:
    def boom(_: Point) -> bool:
        raise RuntimeError("validator bug")

    model = scripted_stream_model([final_answer('{"x": 1, "y": 2}')] * 2)
    with pytest.raises(StructuredOutputError) as info:
        await _agent(model, Point, validators=[boom], max_retries=1)(None)
    assert info.value.attempts[0][1] == "validator raised RuntimeError: validator bug"

    model = scripted_stream_model([final_answer('{"x": 1, "y": 2}')])
    with pytest.raises(PortContractError, match="returns True to accept"):
        await _agent(model, Point, validators=[lambda p: None])(None)


async def test_async_validators_are_awaited() -> None:
    async def check(p: Point) -> bool | str:
        return True if p.y == 7 else "y must be 7"

    model = scripted_stream_model([final_answer('{"x": 1, "y": 2}'), final_answer('{"x": 1, "y": 7}')])
    assert await _agent(model, Point, validators=[check])(None) == Point(x=1, y=7)


async def test_re_asks_open_a_structured_output_retry_attempt_on_the_text_stream() -> None:
    class Sink:
        retractable = True

        def __init__(self) -> None:
            self.events: list[Any] = []

        def emit(self, event: Any) -> None:
            self.events.append(event)

    sink = Sink()
    model = scripted_stream_model([final_answer("{bad"), final_answer('{"x": 3, "y": 4}')],
                                  chunk_size=4)
    assert await _agent(model, Point, prompt={"text_sink": sink})(None) == Point(x=3, y=4)
    resets = [e for e in sink.events if isinstance(e, TurnResetEvent)]
    assert [r.reason for r in resets] == ["structured_output_retry"]
    assert "structured_output_retry" in TURN_RESET_REASONS
    after = sink.events[sink.events.index(resets[0]) + 1:]
    assert "".join(e.text for e in after if isinstance(e, TurnTextEvent)) == '{"x": 3, "y": 4}'


async def test_tool_loop_and_total_budget_errors() -> None:
    loop_forever = [tool_call_turn([tool_call("lookup", {"q": str(i)})]) for i in range(5)]
    with pytest.raises(ToolLoopExceededError, match="3 model turns") as info:
        await _agent(scripted_stream_model(loop_forever), Point, tools=[LOOKUP],
                     prompt={"max_turn_steps": 3})(None)
    assert info.value.max_turn_steps == 3
    assert info.value.checkpoint is None  # a prompt_agent attempt has no chat to go on with

    # Re-asks count against the total: 2 bad answers use up max_total_turns=2.
    model = scripted_stream_model([final_answer("nope"), final_answer("nope")])
    with pytest.raises(TurnBudgetExceededError) as budget:
        await _agent(model, Point, prompt={"max_total_turns": 2})(None)
    assert budget.value.max_total_turns == 2 and model.position == 2
