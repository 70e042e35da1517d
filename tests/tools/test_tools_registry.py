"""Registries, catalogs, plugin dispatch and rehydration."""

from __future__ import annotations

import itertools
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bindloop.contracts import ToolCall, ToolError, ToolOutcome, ToolResult
from bindloop.errors import RunCancelledError, UsageError
from bindloop.tools import (
    DroppedActivation,
    PluginSummary,
    ToolRegistry,
    ToolsPlugin,
    create_tool_registry,
    define_tool,
    initial_active_plugins,
    partition_plugin_catalog,
    plugin_from_tools,
    rehydrate_activation,
)

pytestmark = pytest.mark.anyio


class Pair(msgspec.Struct):
    a: int
    b: int


class Empty(msgspec.Struct):
    pass


def _add(args: Pair, ctx: dict[str, int]) -> ToolOutcome:
    return ToolResult(content=str(args.a + args.b + ctx.get("offset", 0)))


ADD = define_tool(name="add", description="Add.", args=Pair, execute=_add)
MUL = define_tool(name="mul", description="Multiply.", args=Pair,
                  execute=lambda a, c: ToolResult(content=str(a.a * a.b)))
NOTE = define_tool(name="note", description="Note.", args=Empty,
                   execute=lambda a, c: ToolResult(content="noted"))


def math_plugin() -> ToolsPlugin[dict[str, int]]:
    return plugin_from_tools(name="math", description="Arithmetic.", tools=[ADD, MUL])


def notes_plugin() -> ToolsPlugin[dict[str, int]]:
    return plugin_from_tools(name="notes", description="Notes.", tools=[NOTE])


async def test_plugin_dispatches_by_name_and_returns_not_found_for_unknown() -> None:
    plugin = math_plugin()
    assert await plugin.execute("add", '{"a": 1, "b": 2}', {"offset": 10}) == ToolResult(content="13")
    missing = await plugin.execute("div", "{}", {})
    assert isinstance(missing, ToolError) and missing.kind == "not_found" and "div" in missing.error
    bad = await plugin.execute("add", '{"a": "x"}', {})
    assert isinstance(bad, ToolError) and bad.kind == "validation"


def test_plugin_from_tools_refuses_duplicates_and_non_tools() -> None:
    with pytest.raises(UsageError, match="twice"):
        plugin_from_tools(name="p", description="", tools=[ADD, ADD])
    with pytest.raises(UsageError, match="not a Tool"):
        plugin_from_tools(name="p", description="", tools=[object()])  # type: ignore[list-item]
    with pytest.raises(UsageError):
        plugin_from_tools(name="", description="", tools=[])


def test_registry_register_get_aliases_and_core() -> None:
    registered: list[str] = []
    registry: ToolRegistry[ToolsPlugin[dict[str, int]]] = create_tool_registry(
        core_plugins=["old-notes", "notes"], aliases={"old-notes": "older", "older": "notes"},
        on_register=lambda p: registered.append(p.name),
    )
    registry.register(math_plugin())
    registry.register(notes_plugin())
    assert registered == ["math", "notes"]
    assert registry.core_plugins() == ("notes",)
    assert registry.canonicalize_name("old-notes") == "notes"
    assert registry.get("older") is registry.get("notes") is not None
    assert registry.get("nope") is None
    with pytest.raises(UsageError, match="already"):
        registry.register(math_plugin())
    with pytest.raises(UsageError, match="alias"):
        registry.register(plugin_from_tools(name="older", description="", tools=[]))


def test_alias_cycles_are_refused() -> None:
    with pytest.raises(UsageError, match="cycle"):
        create_tool_registry(aliases={"a": "b", "b": "a"})


def test_registries_share_nothing() -> None:
    one: ToolRegistry[ToolsPlugin[Any]] = create_tool_registry()
    two: ToolRegistry[ToolsPlugin[Any]] = create_tool_registry()
    one.register(math_plugin())
    assert two.get("math") is None and two.summaries() == ()


def test_tool_definitions_follow_the_active_set() -> None:
    registry: ToolRegistry[ToolsPlugin[Any]] = create_tool_registry(aliases={"arith": "math"})
    registry.register(notes_plugin())
    registry.register(math_plugin())
    assert [d.name for d in registry.tool_definitions(["notes"])] == ["note"]
    assert [d.name for d in registry.tool_definitions({"arith", "notes", "ghost"})] == [
        "add", "mul", "note"]
    assert registry.tool_definitions([]) == []


def test_duplicate_tool_names_across_active_plugins_are_refused() -> None:
    registry: ToolRegistry[ToolsPlugin[Any]] = create_tool_registry()
    registry.register(math_plugin())
    registry.register(plugin_from_tools(name="other", description="", tools=[ADD]))
    assert len(registry.tool_definitions(["math"])) == 2
    with pytest.raises(UsageError, match="both"):
        registry.tool_definitions(["math", "other"])


async def test_registry_run_tool_call_dispatches_only_to_active_plugins() -> None:
    registry: ToolRegistry[ToolsPlugin[Any]] = create_tool_registry()
    registry.register(math_plugin())
    call = ToolCall(id="c1", name="mul", arguments='{"a": 3, "b": 4}')
    assert await registry.run_tool_call(call, {}, ["math"]) == ToolResult(content="12")
    inactive = await registry.run_tool_call(call, {}, [])
    assert isinstance(inactive, ToolError) and inactive.kind == "not_found"
    assert registry.find_tool("add", ["math"]) is registry.get("math")


def test_initial_active_plugins_is_sorted_and_unique() -> None:
    assert initial_active_plugins(["b", "a", "b"]) == ("a", "b")


def _summary(name: str) -> PluginSummary:
    return PluginSummary(name=name, description=f"{name} tools", tools=(f"{name}_t",))


def test_partition_is_data_in_name_order() -> None:
    catalog = partition_plugin_catalog({"b", "ghost"}, [_summary("c"), _summary("a"), _summary("b")])
    assert [s.name for s in catalog.active] == ["b"]
    assert [s.name for s in catalog.loadable] == ["a", "c"]
    assert catalog.unknown == ("ghost",)


def test_partition_refuses_conflicting_summaries() -> None:
    with pytest.raises(UsageError, match="named"):
        partition_plugin_catalog([], [_summary("a"), PluginSummary(name="a", description="x")])


@settings(max_examples=100, deadline=None)
@given(st.permutations(["alpha", "beta", "gamma", "delta", "eps"]),
       st.sets(st.sampled_from(["alpha", "beta", "gamma", "delta", "eps", "zeta"])),
       st.randoms())
def test_catalog_bytes_do_not_depend_on_registration_or_activation_order(
    order: list[str], active: set[str], rnd: Any
) -> None:
    def render(names: list[str], act: list[str]) -> bytes:
        registry: ToolRegistry[ToolsPlugin[Any]] = create_tool_registry()
        for name in names:
            registry.register(plugin_from_tools(
                name=name, description=f"The {name} tools.",
                tools=[define_tool(name=f"{name}_tool", description="", args=Empty,
                                   execute=lambda a, c: ToolResult(content=""))]))
        catalog = partition_plugin_catalog(act, registry.summaries())
        return msgspec.json.encode((catalog, registry.tool_definitions(act)))

    shuffled = list(active)
    rnd.shuffle(shuffled)
    assert render(order, shuffled) == render(sorted(order), sorted(active))


async def test_rehydrate_canonicalizes_dedupes_and_drops_with_reasons() -> None:
    registry: ToolRegistry[ToolsPlugin[Any]] = create_tool_registry(aliases={"legacy": "math",
                                                                             "older": "math"})
    registry.register(math_plugin())
    registry.register(notes_plugin())
    calls: list[str] = []

    async def resolve(name: str) -> Any:
        calls.append(name)
        if name == "gated":
            return "unavailable"
        if name == "remote":
            raise ConnectionError("refused")
        if name == "flaky":
            return "unreachable"
        return True if registry.get(name) else "unknown"

    result = await rehydrate_activation(
        ["legacy", "notes", "older", "gone", "gated", "math", "remote", "flaky"],
        canonicalize_name=registry.canonicalize_name, resolve=resolve,
    )
    assert calls == ["math", "notes", "gone", "gated", "remote", "flaky"]  # math resolved once
    assert result.active == ("math", "notes")
    assert result.dropped == (
        DroppedActivation(name="gone", reason="unknown"),
        DroppedActivation(name="gated", reason="unavailable"),
        DroppedActivation(name="remote", reason="unreachable", detail="ConnectionError: refused"),
        DroppedActivation(name="flaky", reason="unreachable"),
    )


async def test_rehydrate_records_legacy_spellings_of_a_dropped_plugin() -> None:
    result = await rehydrate_activation(["old", "new"], canonicalize_name=lambda n: "new",
                                        resolve=lambda n: "unknown")
    assert result.dropped == (DroppedActivation(name="new", reason="unknown", names=("old",)),)


async def test_rehydrate_propagates_cancellation_and_refuses_nonsense() -> None:
    def cancelled(name: str) -> Any:
        raise RunCancelledError("stop")

    with pytest.raises(RunCancelledError):
        await rehydrate_activation(["a"], canonicalize_name=str, resolve=cancelled)


@pytest.mark.parametrize("returned", [False, None, "maybe", 1, 0])
async def test_rehydrate_drops_an_unrecognised_resolve_answer_as_unknown(returned: Any) -> None:
    # Rehydration never raises over a port's answer: anything but True or a reason is a drop.
    result = await rehydrate_activation(["a", "b"], canonicalize_name=str,
                                        resolve=lambda n: returned if n == "a" else True)
    assert result.active == ("b",)
    assert result.dropped == (DroppedActivation(
        name="a", reason="unknown", detail=f"resolve returned {returned!r}"),)


def test_permutations_helper_is_exhaustive() -> None:
    # The order-independence property above samples permutations; check one exhaustively too.
    outputs = set()
    for perm in itertools.permutations(["a", "b", "c"]):
        registry: ToolRegistry[ToolsPlugin[Any]] = create_tool_registry()
        for name in perm:
            registry.register(plugin_from_tools(name=name, description=name, tools=[]))
        outputs.add(msgspec.json.encode(partition_plugin_catalog(["b"], registry.summaries())))
    assert len(outputs) == 1
