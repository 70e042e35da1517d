"""Progressive disclosure inside a real loop run: an activation takes effect mid-batch."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from bindloop.contracts import ToolCall, ToolMessage, ToolOutcome, ToolResult
from bindloop.loop import run_tool_loop
from bindloop.tools import (
    ToolRegistry,
    ToolsPlugin,
    create_tool_registry,
    define_tool,
    initial_active_plugins,
    plugin_from_tools,
)
from bindloop.testing import final_answer, loop_harness, tool_call, tool_call_turn
from bindloop.loop import LoopHooks, ToolRunner

pytestmark = pytest.mark.anyio


class Activate(msgspec.Struct):
    plugin: str


class Pair(msgspec.Struct):
    a: int
    b: int


def build() -> tuple[ToolRegistry[ToolsPlugin[None]], set[str]]:
    registry: ToolRegistry[ToolsPlugin[None]] = create_tool_registry(core_plugins=["core"])

    def activate(args: Activate, ctx: None) -> ToolOutcome:
        return ToolResult(content=f"activated {args.plugin}", activate_plugins=(args.plugin,))

    registry.register(plugin_from_tools(name="core", description="Always loaded.", tools=[
        define_tool(name="activate_plugin", description="Load a plugin.", args=Activate,
                    execute=activate)]))
    registry.register(plugin_from_tools(name="math", description="Arithmetic.", tools=[
        define_tool(name="add", description="Add.", args=Pair,
                    execute=lambda a, c: ToolResult(content=str(a.a + a.b)))]))
    return registry, set(initial_active_plugins(registry.core_plugins()))


def tool_messages(state: Any) -> dict[str, ToolMessage]:
    return {m.tool_call_id: m for m in state.messages if isinstance(m, ToolMessage)}


def script() -> list[Any]:
    return [
        tool_call_turn([tool_call("activate_plugin", {"plugin": "math"}, id="act"),
                        tool_call("add", {"a": 2, "b": 3}, id="sum")]),
        final_answer("5"),
    ]


async def test_a_serial_activation_is_visible_to_a_dependent_call_in_the_same_batch() -> None:
    registry, active = build()

    async def dispatch(call: ToolCall) -> ToolOutcome:
        return await registry.run_tool_call(call, None, active)

    h = loop_harness(
        script(),
        runner=ToolRunner(
            run_tool_call=dispatch,
            build_tools=lambda: registry.tool_definitions(active),
            runs_serially=lambda call: call.name == "activate_plugin",
        ),
        hooks=LoopHooks(
            activate=lambda kind, names: active.update(registry.canonicalize_name(n) for n in names),
        ),
    )
    result = await run_tool_loop(h.params)
    assert result.stop_reason == "done"
    assert h.ran == ["activate_plugin", "add"]
    answers = tool_messages(h.state)
    assert answers["sum"].content == "5" and not answers["sum"].is_error
    # The model's first call saw only the core surface; the next one sees the new plugin.
    assert [tools for _, tools in h.model.calls] == [("activate_plugin",), ("activate_plugin", "add")]
    assert active == {"core", "math"}


async def test_without_runs_serially_the_dependent_call_meets_the_old_surface() -> None:
    registry, active = build()

    async def dispatch(call: ToolCall) -> ToolOutcome:
        return await registry.run_tool_call(call, None, active)

    h = loop_harness(
        script(),
        runner=ToolRunner(
            run_tool_call=dispatch,
            build_tools=lambda: registry.tool_definitions(active),
        ),
        hooks=LoopHooks(activate=lambda kind, names: active.update(names)),
    )
    result = await run_tool_loop(h.params)
    assert result.stop_reason == "done"
    answer = tool_messages(h.state)["sum"]
    assert answer.is_error and '"kind":"not_found"' in str(answer.content)
