"""define_tool over a plain function: the name, description and schema come from the function, the
arguments go through the explicit form's decoder, and whatever cannot be described is refused when
the tool is defined."""

from __future__ import annotations

import enum
import functools
import socket
from collections.abc import Callable
from typing import Annotated, Any, Literal

import anyio
import jsonschema
import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bindloop.contracts import ToolCall, ToolError, ToolMessage, ToolResult, ToolSuspend
from bindloop.errors import PortContractError, UsageError
from bindloop.tools import (
    Tool,
    ToolContext,
    create_tool_registry,
    define_tool,
    plugin_from_tools,
    tool_wire_definition,
)
from bindloop.schema import (
    first_schema_violation,
    sanitize_tool_schema,
    sanitize_tool_schema_report,
    strict_json_schema,
)

pytestmark = pytest.mark.anyio


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Point(msgspec.Struct):
    x: int
    y: int = 0


class Report(msgspec.Struct):
    city: str
    high_c: int


CTX = ToolContext("t", "d", {}, "{}", "call_1", "agent")


def _ctx(name: str = "t") -> ToolContext:
    return ToolContext(name, "d", {}, "{}", "call_1", "agent")


# -- what is derived ------------------------------------------------------------------------------

@define_tool
async def search(query: Annotated[str, msgspec.Meta(min_length=1)], ctx: ToolContext,
                 limit: Annotated[int, msgspec.Meta(ge=1, le=50)] = 10,
                 color: Color | None = None, mode: Literal["fast", "slow"] = "fast",
                 target: int | str = 0, point: Point | None = None,
                 tags: Annotated[list[str], msgspec.Meta(max_length=2)] = [],
                 bbox: tuple[float, float] = (0.0, 0.0)) -> str:
    """Search the corpus."""
    return f"{ctx.tool_name}:{query}:{limit}"


class SearchArgs(msgspec.Struct, kw_only=True):
    query: Annotated[str, msgspec.Meta(min_length=1)]
    limit: Annotated[int, msgspec.Meta(ge=1, le=50)] = 10
    color: Color | None = None
    mode: Literal["fast", "slow"] = "fast"
    target: int | str = 0
    point: Point | None = None
    tags: Annotated[list[str], msgspec.Meta(max_length=2)] = []
    bbox: tuple[float, float] = (0.0, 0.0)


EXPLICIT: Tool[SearchArgs, Any] = define_tool(
    name="search", description="Search the corpus.", args=SearchArgs,
    execute=lambda a, c: ToolResult(content=f"{c.tool_name}:{a.query}:{a.limit}"))


def _props(tool: Tool[Any, Any]) -> dict[str, Any]:
    props: Any = tool.parameters["properties"]
    return dict(props)


def _untitled(schema: dict[str, object]) -> dict[str, object]:
    return {k: v for k, v in schema.items() if k != "title"}


def test_the_name_description_and_schema_come_from_the_function() -> None:
    assert isinstance(search, Tool)
    assert search.name == "search" and search.description == "Search the corpus."
    # the same schema the explicit form derives from the equivalent Struct; no context in it
    assert _untitled(search.parameters) == _untitled(EXPLICIT.parameters)
    assert "ctx" not in search.parameters["properties"]  # type: ignore[operator]
    assert tool_wire_definition(search).name == "search"


def test_the_derived_schema_is_already_what_the_sanitizer_and_strict_providers_accept() -> None:
    for tool in (search, define_tool(typical)):
        report = sanitize_tool_schema_report(tool.parameters, policy="refuse")
        assert report.changes == () and report.schema == tool.parameters
        assert sanitize_tool_schema(tool.parameters) == tool.parameters
    strict_json_schema(search.parameters)  # structured output's strict form takes it too


@pytest.mark.parametrize("raw", [
    '{"query": "q", "limit": "10"}', '{"query": ""}', '{"query": "q", "limit": 99}',
    '{"query": "q", "point": {"x": "1"}}', '{"limit": 3}', "[1, 2]", "{not json",
    '{"query": "q", "limit": NaN}', "", {"query": object()}, b"\xff",
])
async def test_bad_arguments_are_the_same_validation_error_as_the_explicit_form(raw: Any) -> None:
    got = await search.execute(raw, _ctx("search"))
    assert isinstance(got, ToolError) and got.kind == "validation"
    assert got == await EXPLICIT.execute(raw, _ctx("search"))


async def test_good_arguments_run_the_function_with_defaults_applied() -> None:
    raw = '{"query": "bind", "limit": 3}'
    assert await search.execute(raw, _ctx("search")) == ToolResult(content="search:bind:3")
    assert await search.execute({"query": "x"}, _ctx("search")) == ToolResult(
        content="search:x:10")


def test_decorator_with_overrides_and_call_form() -> None:
    @define_tool(name="find", description="Find things.")
    def lookup(q: str) -> str:
        """Ignored: description= wins."""
        return q

    assert (lookup.name, lookup.description) == ("find", "Find things.")

    def plain(q: str) -> str:
        return q

    tool = define_tool(plain, name="p")
    assert (tool.name, tool.description) == ("p", "")
    assert define_tool(plain).name == "plain"


async def test_a_partial_and_a_callable_object_work_given_a_name() -> None:
    def scale(x: int, factor: int) -> int:
        """Scale x."""
        return x * factor

    class Doubler:
        async def __call__(self, x: int) -> int:
            return x * 2

    triple = define_tool(functools.partial(scale, factor=3), name="triple")
    assert triple.description == "Scale x."  # the function's, not functools.partial's
    assert list(_props(triple)) == ["x", "factor"]
    assert await triple.execute('{"x": 2}', None) == ToolResult(content="6")
    assert await define_tool(Doubler(), name="double").execute('{"x": 4}', None) == ToolResult(
        content="8")


# -- descriptions ---------------------------------------------------------------------------------

def google(city: str, days: int = 1, units: str = "metric") -> str:
    """Forecast the weather
    for a city.

    Uses the cached forecast when fresh.

    Args:
        city: The city, e.g.
            "Lisbon".
        days (int): How many days ahead.
        units: Metric or imperial.

    Returns:
        The forecast text.

    Raises:
        KeyError: unknown city.
    """
    return city


def numpy_style(city: str, days: int = 1, units: str = "metric") -> str:
    """Forecast the weather for a city.

    Parameters
    ----------
    city : str
        The city, e.g.
        "Lisbon".
    days : int, optional
        How many days ahead.
    units
        Metric or imperial.

    Returns
    -------
    str
        The forecast text.
    """
    return city


def rest_style(city: str, days: int = 1, units: str = "metric") -> str:
    """Forecast the weather for a city.

    :param city: The city, e.g.
        "Lisbon".
    :param int days: How many days ahead.
    :param units: Metric or imperial.
    :returns: The forecast text.
    """
    return city


@pytest.mark.parametrize("fn, summary", [
    (google, "Forecast the weather for a city.\n\nUses the cached forecast when fresh."),
    (numpy_style, "Forecast the weather for a city."),
    (rest_style, "Forecast the weather for a city."),
])
def test_docstring_styles_give_the_description_and_each_parameters(fn: Callable[..., str],
                                                                   summary: str) -> None:
    tool = define_tool(fn)
    assert tool.description == summary
    props: Any = tool.parameters["properties"]
    assert props["city"]["description"] == 'The city, e.g. "Lisbon".'
    assert props["days"]["description"] == "How many days ahead."
    assert props["units"]["description"] == "Metric or imperial."
    assert "Returns" not in str(tool.parameters) and "forecast text" not in str(tool.parameters)


def test_annotated_descriptions_win_over_the_docstring_and_meta_over_both() -> None:
    def f(a: Annotated[str, "from Annotated"], b: Annotated[int, msgspec.Meta(description="meta"),
                                                            "text"],
          c: Annotated[int, msgspec.Meta(ge=0)], d: bool) -> str:
        """Do it.

        Args:
            a: from the docstring
            b: from the docstring
            c: from the docstring
        """
        return a

    props: Any = define_tool(f).parameters["properties"]
    assert props["a"]["description"] == "from Annotated"
    assert props["b"]["description"] == "meta"
    assert props["c"] == {"type": "integer", "minimum": 0, "description": "from the docstring"}
    assert props["d"] == {"type": "boolean"}


def test_no_docstring_means_no_description() -> None:
    def bare(x: int) -> int:
        return x

    tool = define_tool(bare)
    assert tool.description == "" and "description" not in tool.parameters["properties"]["x"]  # type: ignore[index]


# -- the types a schema can say -------------------------------------------------------------------

def typical(name: str, count: int = 1, ratio: float = 0.5, flag: bool = False,
            maybe: str | None = None, kind: Literal["a", "b"] = "a", color: Color = Color.RED,
            items: list[int] = [1, 2], table: dict[str, float] = {}, at: Point | None = None,
            points: list[Point] = [], code: Annotated[str, msgspec.Meta(pattern="^[A-Z]+$")] = "A",
            ) -> Report:
    """A bit of everything."""
    return Report(city=name, high_c=count)


async def test_typical_types_decode_to_what_the_function_receives() -> None:
    seen: list[dict[str, Any]] = []

    def record(name: str, count: int = 1, maybe: str | None = None, color: Color = Color.RED,
               items: list[int] = [1, 2], at: Point | None = None,
               points: list[Point] = [], table: dict[str, float] = {}) -> str:
        seen.append(dict(name=name, count=count, maybe=maybe, color=color, items=items, at=at,
                         points=points, table=table))
        return "ok"

    tool = define_tool(record)
    raw = ('{"name": "n", "color": "blue", "at": {"x": 1}, "points": [{"x": 2, "y": 3}], '
           '"table": {"k": 1}}')
    assert await tool.execute(raw, None) == ToolResult(content="ok")
    assert seen == [dict(name="n", count=1, maybe=None, color=Color.BLUE, items=[1, 2],
                         at=Point(x=1), points=[Point(x=2, y=3)], table={"k": 1.0})]
    assert type(seen[0]["table"]["k"]) is float


async def test_a_mutable_default_is_a_fresh_copy_each_call() -> None:
    got: list[list[int]] = []

    def append(x: int, into: list[int] = [1]) -> int:
        into.append(x)
        got.append(into)
        return len(into)

    tool = define_tool(append)
    assert await tool.execute('{"x": 5}', None) == ToolResult(content="2")
    assert await tool.execute('{"x": 6}', None) == ToolResult(content="2")
    assert got == [[1, 5], [1, 6]]


# -- the context ----------------------------------------------------------------------------------

async def test_the_context_parameter_may_sit_anywhere_and_is_not_in_the_schema() -> None:
    def first(ctx: ToolContext, a: int, b: int = 2) -> str:
        return f"{ctx.call_id}:{a}:{b}"

    def middle(a: int, ctx: ToolContext, b: int = 2) -> str:
        return f"{ctx.call_id}:{a}:{b}"

    def last(a: int, b: int = 2, *, ctx: ToolContext) -> str:
        return f"{ctx.call_id}:{a}:{b}"

    def keyword_only(a: int, *, b: int = 2, ctx: Annotated[ToolContext, "the call"]) -> str:
        return f"{ctx.call_id}:{a}:{b}"

    def positional_only(a: int, /, b: int = 2) -> str:
        return f"-:{a}:{b}"

    def no_context(a: int, b: int = 2) -> str:
        return f"none:{a}:{b}"

    for fn in (first, middle, last, keyword_only, positional_only, no_context):
        tool = define_tool(fn)
        assert list(_props(tool)) == ["a", "b"], fn
        out = await tool.execute('{"a": 1, "b": 3}', CTX)
        assert isinstance(out, ToolResult) and isinstance(out.content, str), (fn, out)
        assert out.content.endswith(":1:3"), (fn, out)
        if fn not in (positional_only, no_context):
            assert out.content == "call_1:1:3"


async def test_the_agent_passes_each_call_its_context() -> None:
    from bindloop.agent import create_agent, equip_instruction, equip_tool, prompt_chat
    from bindloop.testing import final_answer, scripted_stream_model, tool_call, tool_call_turn

    seen: list[tuple[str, str | None, str | None, int]] = []

    @define_tool
    def weather(city: Annotated[str, "A city name"], ctx: ToolContext, days: int = 1) -> Report:
        """Current weather for a city."""
        seen.append((city, ctx.call_id, ctx.agent_id, days))
        return Report(city=city, high_c=24)

    @define_tool
    async def note(text: str) -> None:
        """Save a note."""

    model = scripted_stream_model([
        tool_call_turn([tool_call("weather", {"city": "Lisbon"}, id="c1"),
                        tool_call("note", {"text": "hi"}, id="c2")]),
        tool_call_turn([tool_call("weather", {"city": 7}, id="c3")]),
        final_answer("Sunny, 24C."),
    ])

    async def handler(question: str) -> Any:
        equip_instruction(question)
        equip_tool(weather)
        equip_tool(note)
        return await prompt_chat(max_turn_steps=5)

    result = await create_agent(id="forecaster", handler=handler, model=model)("Lisbon?")
    assert result.data == "Sunny, 24C."
    assert seen == [("Lisbon", "c1", "forecaster", 1)]
    tools = {d.name: d for d in model.requests[0].request.tools}
    assert tools["weather"].description == "Current weather for a city."
    assert tools["weather"].parameters["properties"]["city"]["description"] == "A city name"
    answers = [m for m in model.requests[2].messages if isinstance(m, ToolMessage)]
    assert [m.content for m in answers[:2]] == ['{"city":"Lisbon","high_c":24}', "null"]
    assert "Invalid arguments for weather" in str(answers[2].content)
    assert answers[2].is_error


async def test_a_registry_dispatches_a_function_tool_with_the_hosts_context() -> None:
    seen: list[object] = []

    @define_tool
    def add(a: int, b: int, ctx: ToolContext) -> int:
        """Add two numbers."""
        seen.append(ctx)
        return a + b

    registry: Any = create_tool_registry()
    registry.register(plugin_from_tools(name="math", description="Arithmetic.", tools=[add]))
    assert [d.name for d in registry.tool_definitions({"math"})] == ["add"]
    call = ToolCall(id="c1", name="add", arguments='{"a": 2, "b": 3}')
    assert await registry.run_tool_call(call, CTX, {"math"}) == ToolResult(content="5")
    assert seen == [CTX]


# -- sync, async and what they return -------------------------------------------------------------

class Weird:
    pass


@pytest.mark.parametrize("value, content", [
    ("plain text", "plain text"),
    (Report(city="Lisbon", high_c=24), '{"city":"Lisbon","high_c":24}'),
    ({"b": 1, "a": [1, 2.5, None]}, '{"a":[1,2.5,null],"b":1}'),
    ([1, "two"], '[1,"two"]'),
    (42, "42"),
    (None, "null"),
    (True, "true"),
    (Color.BLUE, '"blue"'),
])
@pytest.mark.parametrize("is_async", [False, True])
async def test_returns_become_the_result_text(value: Any, content: str, is_async: bool) -> None:
    def sync_body() -> Any:
        return value

    async def async_body() -> Any:
        return value

    tool = define_tool(async_body if is_async else sync_body, name="t")
    assert await tool.execute("{}", None) == ToolResult(content=content)


@pytest.mark.parametrize("outcome", [
    ToolResult(content="r", activate_plugins=("math",)),
    ToolError(error="nope", kind="rejected"),
    ToolSuspend(mode="waiting_for_reply", detail="Which city?"),
])
@pytest.mark.parametrize("is_async", [False, True])
async def test_an_outcome_returned_is_passed_through(outcome: Any, is_async: bool) -> None:
    def sync_body() -> Any:
        return outcome

    async def async_body() -> Any:
        return outcome

    tool = define_tool(async_body if is_async else sync_body, name="t")
    assert await tool.execute(None, None) is outcome


async def test_a_sync_function_answers_without_an_awaitable() -> None:
    """The loop's driver awaits only what is awaitable: a sync function tool's ``invoke`` is the
    outcome itself, as an explicit tool with a plain ``execute`` gives."""

    def ping() -> str:
        return "pong"

    async def aping() -> str:
        return "pong"

    assert define_tool(ping).invoke("{}", None) == ToolResult(content="pong")
    pending = define_tool(aping).invoke("{}", None)
    assert not isinstance(pending, ToolResult)
    assert await pending == ToolResult(content="pong")  # type: ignore[misc]


@pytest.mark.parametrize("is_async", [False, True])
async def test_a_return_that_is_not_json_is_a_port_contract_error(is_async: bool) -> None:
    def sync_body() -> Any:
        return Weird()

    async def async_body() -> Any:
        return Weird()

    tool = define_tool(async_body if is_async else sync_body, name="weird")
    with pytest.raises(PortContractError, match="'weird' returned Weird"):
        await tool.execute("{}", None)


async def test_exceptions_from_the_function_propagate() -> None:
    def boom(x: int) -> str:
        raise RuntimeError("disk on fire")

    with pytest.raises(RuntimeError, match="disk on fire"):
        await define_tool(boom).execute('{"x": 1}', None)


# -- refused when defined -------------------------------------------------------------------------

def untyped(x, y: int) -> str:  # type: ignore[no-untyped-def]
    return ""


def takes_socket(conn: socket.socket) -> str:
    return ""


def takes_callback(on_done: Callable[[int], None]) -> str:
    return ""


def takes_object(thing: object) -> str:
    return ""


def star_args(x: int, *rest: int) -> str:
    return ""


def star_kwargs(x: int, **options: int) -> str:
    return ""


def bad_default(x: int, when: Any = Weird()) -> str:
    return ""


def optional_context(x: int, ctx: ToolContext | None = None) -> str:
    return ""


def two_contexts(a: ToolContext, b: ToolContext) -> str:
    return ""


def unresolved(x: NotDefinedAnywhere) -> str:  # type: ignore[name-defined]  # noqa: F821
    return ""


@pytest.mark.parametrize("fn, fragments", [
    (untyped, ["define_tool(untyped)", "'x'", "no type hint"]),
    (takes_socket, ["define_tool(takes_socket)", "'conn'", "socket", "cannot describe"]),
    (takes_callback, ["define_tool(takes_callback)", "'on_done'", "cannot describe"]),
    (takes_object, ["define_tool(takes_object)", "'thing'", "cannot describe"]),
    (star_args, ["define_tool(star_args)", "*rest"]),
    (star_kwargs, ["define_tool(star_kwargs)", "**options"]),
    (bad_default, ["define_tool(bad_default)", "'when'", "not JSON"]),
    (optional_context, ["define_tool(optional_context)", "'ctx'", "exactly ToolContext"]),
    (two_contexts, ["define_tool(two_contexts)", "'b'", "second ToolContext"]),
    (unresolved, ["define_tool(unresolved)", "'x'", "NotDefinedAnywhere"]),
    (lambda x: x, ["no usable __name__", "name="]),
])
def test_what_a_schema_cannot_describe_is_refused_at_definition(
        fn: Callable[..., Any], fragments: list[str]) -> None:
    with pytest.raises(UsageError) as info:
        define_tool(fn)
    for fragment in fragments:
        assert fragment in str(info.value), (fragment, str(info.value))


def test_the_two_forms_do_not_mix() -> None:
    with pytest.raises(UsageError, match="not both"):
        define_tool(google, args=Point, execute=lambda a, c: ToolResult(content=""))  # type: ignore[call-overload]
    with pytest.raises(UsageError, match="both args= .* and execute="):
        define_tool(name="x", description="", args=Point)  # type: ignore[call-overload]
    with pytest.raises(UsageError, match="name= and description="):
        define_tool(args=Point, execute=lambda a, c: ToolResult(content=""))  # type: ignore[call-overload]
    with pytest.raises(UsageError, match="not a function"):
        define_tool(search)  # type: ignore[call-overload]
    with pytest.raises(UsageError, match="name"):
        define_tool(google, name=" ")


# -- for any combination of parameters: the schema and the decoder agree, and the function gets
#    exactly the decoded values ----------------------------------------------------------------

ANY_JSON = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-3, 12), st.sampled_from([0.5, -2.5]),
              st.sampled_from(["", "a", "red", "blue", "xyz", "AB"])),
    lambda inner: st.one_of(st.lists(inner, max_size=3),
                            st.dictionaries(st.sampled_from(["x", "y", "k"]), inner, max_size=3)),
    max_leaves=6,
)

# (type, values that fit it, defaults to try)
KINDS: list[tuple[Any, st.SearchStrategy[Any], list[Any]]] = [
    (int, st.integers(-5, 5), [0, 7]),
    (str, st.sampled_from(["", "a", "xyz"]), ["", "d"]),
    (float, st.one_of(st.integers(-3, 3), st.sampled_from([0.25, -1.5])), [0.5]),
    (bool, st.booleans(), [False, True]),
    (int | None, st.one_of(st.none(), st.integers(0, 3)), [None, 1]),
    (Literal["a", "b"], st.sampled_from(["a", "b"]), ["b"]),
    (Color, st.sampled_from(["red", "blue"]), [Color.RED]),
    (list[str], st.lists(st.sampled_from(["a", "b"]), max_size=3), [[], ["x"]]),
    (dict[str, int], st.dictionaries(st.sampled_from(["k", "j"]), st.integers(0, 2), max_size=2),
     [{}]),
    (Point, st.fixed_dictionaries({"x": st.integers(0, 3)}, optional={"y": st.integers(0, 3)}),
     [Point(x=1)]),
    (Point | None, st.one_of(st.none(), st.fixed_dictionaries({"x": st.integers(0, 3)})), [None]),
    (Annotated[int, msgspec.Meta(ge=0, le=10)], st.integers(0, 10), [5]),
    (Annotated[str, msgspec.Meta(max_length=2), "short text"], st.sampled_from(["", "ab"]), ["z"]),
    (Annotated[list[int], msgspec.Meta(min_length=1)], st.lists(st.integers(0, 2), min_size=1,
                                                                max_size=2), [[1]]),
    (int | str, st.one_of(st.integers(0, 3), st.sampled_from(["a", ""])), [0, "x"]),
    (list[Point], st.lists(st.fixed_dictionaries({"x": st.integers(0, 3)}), max_size=2), [[]]),
    (tuple[float, float], st.tuples(st.integers(0, 2), st.sampled_from([0.5, 1.5])).map(list),
     [(0.0, 0.0)]),
    (Annotated[float, msgspec.Meta(gt=0.0, le=1.0)], st.sampled_from([0.25, 1, 1.0]), [0.5]),
]


@st.composite
def signatures(draw: st.DrawFn) -> tuple[list[tuple[str, int, Any, bool]], str]:
    """Parameters as ``(name, kind index, default, keyword_only)`` — required positional ones
    first, as Python wants — and where the context goes."""
    count = draw(st.integers(0, 5))
    params: list[tuple[str, int, Any, bool]] = []
    seen_default = False
    for i in range(count):
        kind = draw(st.integers(0, len(KINDS) - 1))
        has_default = draw(st.booleans())
        keyword_only = draw(st.booleans()) if has_default or seen_default else False
        default = draw(st.sampled_from(KINDS[kind][2])) if has_default else _NO_DEFAULT
        if has_default and not keyword_only:
            seen_default = True
        if seen_default and not has_default:
            keyword_only = True
        params.append((f"p{i}", kind, default, keyword_only))
    params.sort(key=lambda p: p[3])  # keyword-only last
    ctx_at = draw(st.sampled_from(["none", "first", "keyword"]))
    return params, ctx_at


_NO_DEFAULT = object()


def _build(params: list[tuple[str, int, Any, bool]], ctx_at: str,
           received: list[dict[str, Any]]) -> Callable[..., str]:
    namespace: dict[str, Any] = {"received": received, "ToolContext": ToolContext}
    positional: list[str] = ["ctx: ToolContext"] if ctx_at == "first" else []
    keyword: list[str] = []
    for name, kind, default, keyword_only in params:
        namespace[f"T_{name}"] = KINDS[kind][0]
        text = f"{name}: T_{name}"
        if default is not _NO_DEFAULT:
            namespace[f"D_{name}"] = default
            text += f" = D_{name}"
        (keyword if keyword_only else positional).append(text)
    if ctx_at == "keyword":
        keyword.append("ctx: ToolContext")
    signature = ", ".join(positional + (["*", *keyword] if keyword else []))
    source = f"def generated({signature}) -> str:\n    received.append(dict(locals()))\n    return 'ok'\n"
    exec(compile(source, "<generated>", "exec"), namespace)
    fn: Callable[..., str] = namespace["generated"]
    return fn


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(signatures(), st.data())
def test_for_any_signature_the_schema_and_the_decoder_agree(
        shape: tuple[list[tuple[str, int, Any, bool]], str], data: st.DataObject) -> None:
    params, ctx_at = shape
    received: list[dict[str, Any]] = []
    tool = define_tool(_build(params, ctx_at, received))
    assert sanitize_tool_schema_report(tool.parameters, policy="refuse").changes == ()
    fitting = {name: KINDS[kind][1] for name, kind, _, _ in params}
    anything = {name: ANY_JSON for name, _, _, _ in params}
    value = data.draw(st.one_of(
        st.fixed_dictionaries({}, optional=fitting),
        st.fixed_dictionaries({}, optional={**anything, "extra": ANY_JSON}),
    ))
    schema_says = jsonschema.Draft202012Validator(tool.parameters).is_valid(value)
    outcome = tool.invoke(msgspec.json.encode(value), CTX)
    accepted = not isinstance(outcome, ToolError)
    assert schema_says == accepted, (value, outcome, tool.parameters)
    # the project's own validator (MCP calls, structured answers) reads the schema the same way
    assert (first_schema_violation(value, tool.parameters) is None) == accepted, value
    if not accepted:
        assert received == [] and "Invalid arguments for generated" in outcome.error  # type: ignore[union-attr]
        return
    assert outcome == ToolResult(content="ok")
    expected: dict[str, Any] = {}
    for name, kind, default, _ in params:
        if name in value:
            expected[name] = msgspec.json.decode(msgspec.json.encode(value[name]),
                                                 type=KINDS[kind][0])
        else:
            expected[name] = default
    if ctx_at != "none":
        expected["ctx"] = CTX
    assert received == [expected]
    for name, _, _, _ in params:  # equal and of the same type: 1 is not 1.0, nor True
        assert type(received[0][name]) is type(expected[name])


# -- the agent takes a plain function where it takes a tool --------------------------------------

def city_weather(city: str) -> str:
    """Weather for a city."""
    return f"sunny in {city}"


async def test_equip_tool_call_tool_and_augment_tool_take_a_plain_function() -> None:
    from bindloop.agent import (
        augment_tool,
        call_tool,
        create_agent,
        equip_instruction,
        equip_tool,
        prompt_chat,
    )
    from bindloop.agent.middleware import ToolMiddleware
    from bindloop.testing import final_answer, scripted_stream_model, tool_call, tool_call_turn

    assert await call_tool(city_weather, {"city": "Porto"}) == "sunny in Porto"
    layers: list[str] = []

    async def mark(ctx: ToolContext, next_: Any) -> Any:
        layers.append(ctx.tool_name)
        return await next_()

    wrapped = augment_tool(city_weather, [ToolMiddleware(name="mark", handler=mark)])
    assert wrapped.name == "city_weather" and wrapped.definition.description == "Weather for a city."
    assert await call_tool(wrapped, {"city": "Faro"}) == "sunny in Faro" and layers == ["city_weather"]

    model = scripted_stream_model([tool_call_turn([tool_call("city_weather", {"city": "Lisbon"})]),
                                   final_answer("ok")] * 2)

    async def handler(_: None) -> Any:
        equip_instruction("Weather in Lisbon?")
        equip_tool(city_weather)
        return await prompt_chat()

    agent = create_agent(id="a", handler=handler, model=model)
    assert (await agent(None)).data == "ok"
    assert (await agent(None)).data == "ok"
    tool_messages = [m for m in model.requests[1].messages if isinstance(m, ToolMessage)]
    assert [m.content for m in tool_messages] == ["sunny in Lisbon"]


async def test_equip_tool_refuses_a_function_it_cannot_describe_before_the_model_is_called() -> None:
    from bindloop.agent import create_agent, equip_instruction, equip_tool, prompt_chat
    from bindloop.testing import final_answer, scripted_stream_model

    model = scripted_stream_model([final_answer("never")])

    async def handler(_: None) -> Any:
        equip_instruction("q")
        equip_tool(takes_socket)
        return await prompt_chat()

    with pytest.raises(UsageError, match="'conn'"):
        await create_agent(id="a", handler=handler, model=model)(None)
    assert model.requests == []

    async def not_a_tool(_: None) -> Any:
        equip_instruction("q")
        equip_tool(42)  # type: ignore[arg-type]
        return await prompt_chat()

    with pytest.raises(UsageError, match="not a tool"):
        await create_agent(id="b", handler=not_a_tool, model=model)(None)


# -- docs/tools.md's example runs as written ----------------------------------------------------

async def test_the_plugins_page_example_runs_as_written() -> None:
    import re
    import textwrap
    from pathlib import Path

    page = (Path(__file__).resolve().parents[2] / "docs" / "tools.md").read_text()
    section = page.split("## Tools from functions", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```python\n(.*?)```", section, re.S)
    namespace: dict[str, Any] = {}
    exec(compile(textwrap.dedent(block), "tools.md", "exec"), namespace)
    tool = namespace["search"]
    assert (tool.name, tool.description) == ("search", "Search the corpus.")
    props = tool.parameters["properties"]
    assert props["query"] == {"type": "string", "minLength": 1, "description": "What to look for."}
    assert props["limit"]["description"] == "How many hits at most."
    assert tool.parameters["required"] == ["query"]
    out = await tool.execute('{"query": "bind"}', _ctx("search"))
    assert out == ToolResult(content='[{"title":"bind (call_1)","score":1.0}]')
    bad = await tool.execute('{"query": "q", "limit": "x"}', _ctx("search"))
    assert bad == ToolError(
        error="Invalid arguments for search: Expected `int`, got `str` - at `$.limit`",
        kind="validation")
    assert bad.error in page  # the message the page quotes


def test_a_sentence_ending_in_a_colon_is_not_a_section() -> None:
    def lookup(key: str) -> str:
        """Look the key up in this order:

        the cache, then the database.

        Args:
            key: The key.
        """
        return key

    tool = define_tool(lookup)
    assert tool.description == "Look the key up in this order:\n\nthe cache, then the database."
    assert tool.parameters["properties"]["key"]["description"] == "The key."  # type: ignore[index]


def test_an_explicit_form_execute_passed_as_a_function_is_refused_with_a_hint() -> None:
    async def execute(args: Point, ctx: object) -> ToolResult:
        return ToolResult(content="")

    with pytest.raises(UsageError, match=r"'ctx'.*define_tool\(name=, description=, args=, "):
        define_tool(execute)


async def test_a_method_is_defined_from_the_bound_method() -> None:
    with pytest.raises(UsageError, match=r"'self'.*define_tool\(obj.method\)"):
        class Service:
            @define_tool
            def lookup(self, key: str) -> str:
                return key

    class Store:
        def __init__(self) -> None:
            self.data = {"a": "1"}

        def get(self, key: str) -> str:
            """Read a key."""
            return self.data[key]

    tool = define_tool(Store().get)
    assert (tool.name, tool.description) == ("get", "Read a key.")
    assert list(_props(tool)) == ["key"]
    assert await tool.execute('{"key": "a"}', None) == ToolResult(content="1")


def test_a_name_no_provider_accepts_is_refused() -> None:
    def ok(x: int) -> int:
        return x

    with pytest.raises(UsageError, match="not a valid provider tool name"):
        define_tool(ok, name="has space")
    with pytest.raises(UsageError, match="not a valid provider tool name"):
        define_tool(ok, name="x" * 65)


# -- docstrings: each style gives back the descriptions it was written with ----------------------

WORDS = st.lists(st.sampled_from(["alpha", "beta", "the", "city", "e.g.", "(km)", "a-b", "42"]),
                 min_size=1, max_size=12)


def _wrap(words: list[str], width: int) -> list[str]:
    lines: list[str] = []
    for i in range(0, len(words), width):
        lines.append(" ".join(words[i:i + width]))
    return lines


def _render(style: str, summary: list[str], docs: dict[str, list[str]], width: int) -> str:
    out = [*_wrap(summary, width), ""]
    if style == "google":
        out.append("Args:")
        for name, words in docs.items():
            first, *rest = _wrap(words, width)
            out.append(f"    {name} (int): {first}")
            out.extend(f"        {line}" for line in rest)
        out += ["", "Returns:", "    Something."]
    elif style == "numpy":
        out += ["Parameters", "----------"]
        for name, words in docs.items():
            out.append(f"{name} : int, optional")
            out.extend(f"    {line}" for line in _wrap(words, width))
        out += ["", "Returns", "-------", "int", "    Something."]
    else:
        for name, words in docs.items():
            first, *rest = _wrap(words, width)
            out.append(f":param {name}: {first}")
            out.extend(f"    {line}" for line in rest)
            out.append(f":type {name}: int")
        out.append(":returns: Something.")
    return "\n    ".join(out)  # indented like a docstring in a function body


def _three(a: int = 0, b: int = 0, c: int = 0) -> int:
    return a


@settings(max_examples=100, deadline=None)
@given(style=st.sampled_from(["google", "numpy", "rest"]), summary=WORDS,
       docs=st.dictionaries(st.sampled_from(["a", "b", "c"]), WORDS, max_size=3),
       width=st.integers(1, 6))
def test_each_docstring_style_gives_back_what_it_says(style: str, summary: list[str],
                                                      docs: dict[str, list[str]],
                                                      width: int) -> None:
    fn = functools.partial(_three)
    fn.__doc__ = _render(style, summary, docs, width)
    tool = define_tool(fn, name="three")
    assert tool.description == " ".join(summary)
    props: Any = tool.parameters["properties"]
    for name in ("a", "b", "c"):
        if name in docs:
            assert props[name]["description"] == " ".join(docs[name]), (fn.__doc__, props)
        else:
            assert "description" not in props[name]


# -- a returned value: the model reads it back exactly, in the same bytes whatever the key order ---

@settings(max_examples=150, deadline=None)
@given(ANY_JSON.filter(lambda v: not isinstance(v, str)), st.randoms(use_true_random=False))
def test_a_returned_json_value_reads_back_equal_with_stable_bytes(value: Any, rnd: Any) -> None:
    def shuffled(v: Any) -> Any:
        if isinstance(v, dict):
            items = [(k, shuffled(x)) for k, x in v.items()]
            rnd.shuffle(items)
            return dict(items)
        if isinstance(v, list):
            return [shuffled(x) for x in v]
        return v

    def body() -> Any:
        return value

    def other() -> Any:
        return shuffled(value)

    first = define_tool(body).invoke("{}", None)
    second = define_tool(other, name="body").invoke("{}", None)
    assert isinstance(first, ToolResult) and isinstance(first.content, str)
    assert msgspec.json.decode(first.content) == value
    assert first == second


async def test_equip_tool_defines_a_plain_function_once_per_agent(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import bindloop.agent._tools as agent_tools
    from bindloop.agent import create_agent, equip_instruction, equip_tool, prompt_chat
    from bindloop.testing import final_answer, scripted_stream_model

    defined: list[object] = []
    real = agent_tools.define_tool

    def counting(fn: Any) -> Any:
        defined.append(fn)
        return real(fn)

    monkeypatch.setattr(agent_tools, "define_tool", counting)
    model = scripted_stream_model([final_answer("ok")] * 3)

    async def handler(_: None) -> Any:
        equip_instruction("q")
        equip_tool(city_weather)
        return await prompt_chat()

    agent = create_agent(id="a", handler=handler, model=model)
    for _ in range(3):
        assert (await agent(None)).data == "ok"
    assert defined == [city_weather]
    assert [d.name for d in model.requests[2].request.tools] == ["city_weather"]


async def test_a_parameter_named_with_two_leading_underscores_keeps_its_name() -> None:
    def odd(__key: str, _p0: int = 1, __opts: list[int] = [1]) -> str:
        return f"{__key}:{_p0}:{__opts}"

    tool = define_tool(odd)
    assert list(_props(tool)) == ["__key", "_p0", "__opts"]
    assert tool.parameters["required"] == ["__key"]
    assert await tool.execute('{"__key": "k", "__opts": [2]}', None) == ToolResult(
        content="k:1:[2]")
    bad = await tool.execute('{"_p0": 2}', None)
    assert isinstance(bad, ToolError) and "`__key`" in bad.error


def test_the_explicit_form_refuses_an_execute_without_its_context() -> None:
    """Written without ``ctx``, the tool would fail only when called (a TypeError the model
    reads): refused when it is defined, naming the tool and what execute takes."""
    import msgspec as _msgspec

    from bindloop.errors import UsageError as _UsageError
    from bindloop.tools import define_tool as _define

    class Args(_msgspec.Struct):
        path: str

    def no_ctx(args: Args) -> str:
        return args.path

    with pytest.raises(_UsageError, match=r"'rm'.*\(args\)"):
        _define(name="rm", description="x", args=Args, execute=no_ctx)
    _define(name="rm", description="x", args=Args, execute=lambda args, ctx: "ok")
    _define(name="rm", description="x", args=Args, execute=lambda *a: "ok")


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.integers(), st.integers(min_value=599, max_value=620).map(lambda d: 10**d - 1),
                 st.integers(min_value=599, max_value=620).map(lambda d: -(10**d)),
                 st.booleans()))
def test_a_returned_int_reads_as_the_encoders_json_text(value: int) -> None:
    """An int (either side of the bound under which the tool writes its text itself) or a bool
    returned by a function tool is the text the JSON encoder writes for it."""
    def body() -> Any:
        return value

    async def async_body() -> Any:
        return value

    expected = ToolResult(content=msgspec.json.encode(value).decode())
    assert define_tool(body).invoke("{}", None) == expected
    assert anyio.run(define_tool(async_body, name="body").execute, "{}", None) == expected
