"""define_tool: the Struct is the one source of truth for the schema and for validation."""

from __future__ import annotations

import enum
from typing import Annotated, Any, Literal

import jsonschema
import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bindloop.contracts import (
    ToolDefinition,
    ToolError,
    ToolMessage,
    ToolOutcome,
    ToolResult,
    ToolSuspend,
    encode_tool_error,
    tool_error_message,
    tool_outcome_message,
)
from bindloop.errors import PortContractError, UsageError
from bindloop.tools import define_tool, tool_wire_definition


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Point(msgspec.Struct):
    x: int
    y: int = 0


class Args(msgspec.Struct):
    query: Annotated[str, msgspec.Meta(min_length=1)]
    limit: Annotated[int, msgspec.Meta(ge=1, le=50)] = 10
    color: Color | None = None
    mode: Literal["fast", "slow"] = "fast"
    target: int | str = 0
    point: Point | None = None
    tags: Annotated[list[str], msgspec.Meta(max_length=2)] = []
    bbox: tuple[float, float] = (0.0, 0.0)


class Ctx(msgspec.Struct):
    tenant: str


seen: list[tuple[Args, Ctx]] = []


async def search(args: Args, ctx: Ctx) -> ToolOutcome:
    return ToolResult(content=f"{ctx.tenant}:{args.query}:{args.limit}")


pytestmark = pytest.mark.anyio

SEARCH = define_tool(name="search", description="Search the corpus.", args=Args, execute=search)


async def test_execute_receives_a_typed_instance_with_defaults_applied() -> None:
    got: list[Args] = []

    def body(args: Args, ctx: Ctx) -> ToolOutcome:
        got.append(args)
        return ToolResult(content="ok")

    tool = define_tool(name="s", description="", args=Args, execute=body)
    assert await tool.execute('{"query": "q", "point": {"x": 2}}', Ctx(tenant="t")) == (
        ToolResult(content="ok"))
    assert got == [Args(query="q", point=Point(x=2, y=0))]
    assert got[0].limit == 10 and got[0].mode == "fast"


async def test_async_and_mapping_arguments() -> None:
    outcome = await SEARCH.execute({"query": "bind", "limit": 3}, Ctx(tenant="acme"))
    assert outcome == ToolResult(content="acme:bind:3")


@pytest.mark.parametrize("raw, fragment", [
    ('{"query": "q", "limit": "10"}', "$.limit"),
    ('{"query": ""}', "$.query"),
    ('{"query": "q", "limit": 99}', "$.limit"),
    ('{"query": "q", "point": {"x": "1"}}', "$.point.x"),
    ('{"limit": 3}', "query"),
    ("[1, 2]", "object"),
    ("{not json", "not valid JSON"),
    ('{"query": "q", "limit": NaN}', "not valid JSON"),  # the one reader refuses non-JSON numbers
    ("", "query"),  # empty text reads as {} (then `query` is missing)
    ({"query": object()}, "not JSON"),
])
async def test_bad_arguments_come_back_as_a_validation_value_naming_the_path(
    raw: Any, fragment: str
) -> None:
    outcome = await SEARCH.execute(raw, Ctx(tenant="t"))
    assert isinstance(outcome, ToolError)
    assert outcome.kind == "validation"
    assert fragment in outcome.error
    assert "search" in outcome.error


class NoArgs(msgspec.Struct):
    pass


@pytest.mark.parametrize("raw", ["", "   ", None, "{}"])
async def test_empty_arguments_mean_no_arguments(raw: Any) -> None:
    tool = define_tool(name="ping", description="", args=NoArgs,
                       execute=lambda a, c: ToolResult(content="pong"))
    assert await tool.execute(raw, None) == ToolResult(content="pong")


async def test_a_body_returning_a_non_outcome_is_a_port_contract_error() -> None:
    tool = define_tool(name="bad", description="", args=NoArgs, execute=lambda a, c: "oops")  # type: ignore[arg-type,return-value]
    with pytest.raises(PortContractError, match="bad"):
        await tool.execute("{}", None)


async def test_body_exceptions_propagate() -> None:
    def boom(args: NoArgs, ctx: object) -> ToolOutcome:
        raise RuntimeError("disk on fire")

    tool = define_tool(name="boom", description="", args=NoArgs, execute=boom)
    with pytest.raises(RuntimeError, match="disk on fire"):
        await tool.execute("{}", None)


def test_define_tool_refuses_what_is_not_a_struct_object() -> None:
    class Arr(msgspec.Struct, array_like=True):
        a: int

    with pytest.raises(UsageError, match="Struct"):
        define_tool(name="x", description="", args=dict, execute=lambda a, c: ToolResult(content=""))  # type: ignore[type-var]
    with pytest.raises(UsageError, match="object schema"):
        define_tool(name="x", description="", args=Arr, execute=lambda a, c: ToolResult(content=""))
    with pytest.raises(UsageError, match="name"):
        define_tool(name=" ", description="", args=NoArgs, execute=lambda a, c: ToolResult(content=""))


def test_the_schema_is_sanitized_and_inlined() -> None:
    params = SEARCH.parameters
    assert params["type"] == "object" and "$defs" not in params and "$ref" not in str(params)
    props: Any = params["properties"]
    assert props["query"] == {"type": "string", "minLength": 1}
    assert props["color"]["anyOf"][1] == {"type": "null"}
    assert sorted(props["color"]["anyOf"][0]["enum"]) == ["blue", "red"]
    assert props["mode"]["enum"] == ["fast", "slow"] and props["mode"]["type"] == "string"
    assert params["required"] == ["query"]
    assert props["bbox"] == {"type": "array", "minItems": 2, "maxItems": 2,
                             "items": {"type": "number"}, "default": [0.0, 0.0]}


class Pair(msgspec.Struct):
    at: tuple[int, str]


def test_a_mixed_tuple_field_is_accepted_and_still_validated_by_position() -> None:
    tool = define_tool(name="pair", description="", args=Pair,
                       execute=lambda a, c: ToolResult(content=repr(a.at)))
    at: Any = tool.parameters["properties"]
    assert at["at"]["items"] == {"anyOf": [{"type": "integer"}, {"type": "string"}]}
    assert "prefixItems" not in at["at"]
    assert isinstance(tool.parse_arguments('{"at": ["x", 1]}'), ToolError)
    assert tool.parse_arguments('{"at": [1, "x"]}') == Pair(at=(1, "x"))


def test_wire_definition_uses_the_wire_name_when_given() -> None:
    assert tool_wire_definition(SEARCH) == ToolDefinition(
        name="search", description="Search the corpus.", parameters=SEARCH.parameters)
    assert tool_wire_definition(SEARCH, "corpus__search").name == "corpus__search"
    with pytest.raises(UsageError, match="provider tool name"):
        tool_wire_definition(SEARCH, "has space")


@pytest.mark.parametrize("name", ["search\n", "a\nb", "x" * 65, ""])
def test_wire_name_must_match_in_full(name: str) -> None:
    with pytest.raises(UsageError, match="provider tool name"):
        tool_wire_definition(SEARCH, name)


def test_the_one_tool_message_builder_uses_the_loops_error_encoding() -> None:
    error = ToolError(error="bad limit", kind="validation")
    message = tool_outcome_message("call_1", error)
    assert message == tool_error_message("call_1", "bad limit", "validation")
    assert message.content == encode_tool_error("bad limit", "validation")
    assert message.is_error
    assert tool_outcome_message("call_2", ToolResult(content="hi"), name="search") == ToolMessage(
        tool_call_id="call_2", content="hi", name="search")
    with pytest.raises(UsageError, match="suspend"):
        tool_outcome_message("c", ToolSuspend(mode="resuming_later"))  # type: ignore[arg-type]


# -- the schema the model sees and the validation agree ----------------------------------------

ANY_JSON = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-3, 60), st.sampled_from([0.5, -2.5]),
              st.sampled_from(["", "q", "red", "blue", "fast", "slow", "other"])),
    lambda inner: st.one_of(st.lists(inner, max_size=3),
                            st.dictionaries(st.sampled_from(["x", "y", "z"]), inner, max_size=3)),
    max_leaves=6,
)
FIELD_VALUES = {
    "query": st.one_of(st.sampled_from(["", "q", "long query"]), ANY_JSON),
    "limit": st.one_of(st.integers(-2, 60), ANY_JSON),
    "color": st.one_of(st.sampled_from(["red", "blue", "green", None]), ANY_JSON),
    "mode": st.one_of(st.sampled_from(["fast", "slow", "medium"]), ANY_JSON),
    "target": st.one_of(st.integers(-2, 2), st.sampled_from(["a", ""]), ANY_JSON),
    "point": st.one_of(st.none(), st.fixed_dictionaries(
        {"x": st.one_of(st.integers(0, 3), ANY_JSON)}, optional={"y": st.integers(0, 3)}), ANY_JSON),
    "tags": st.one_of(st.lists(st.sampled_from(["a", "b"]), max_size=4), ANY_JSON),
    "bbox": st.one_of(st.lists(st.sampled_from([0, 1.5, "a"]), max_size=3), ANY_JSON),
    "extra": ANY_JSON,
}
ARG_OBJECTS = st.fixed_dictionaries({}, optional=FIELD_VALUES)


@settings(max_examples=200, deadline=None)
@given(st.one_of(ARG_OBJECTS, ANY_JSON))
def test_schema_and_validation_agree(value: Any) -> None:
    schema_says = jsonschema.Draft202012Validator(SEARCH.parameters).is_valid(value)
    parsed = SEARCH.parse_arguments(msgspec.json.encode(value))
    assert schema_says == (not isinstance(parsed, ToolError)), (value, parsed)
