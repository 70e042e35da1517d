"""A tool that loads a skill inside a loop run: the next model call carries its body."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec
import pytest

from bindloop.contracts import Message, SystemMessage, ToolCall, ToolOutcome, ToolResult
from bindloop.loop import run_tool_loop
from bindloop.tools import (
    ToolRegistry,
    ToolsPlugin,
    create_tool_registry,
    define_tool,
    plugin_from_tools,
)
from bindloop.skills import (
    SkillInstructions,
    SkillSpec,
    admit_skill_load,
    create_skill_activation,
    create_skill_registry,
    resolve_active_skill_instructions,
)
from bindloop.loop import LoopHooks, ToolRunner
from bindloop.model import ModelRequest
from bindloop.testing import final_answer, function_model, loop_harness, tool_call, tool_call_turn

pytestmark = pytest.mark.anyio


class LoadSkill(msgspec.Struct):
    ref: str


async def test_load_skill_tool_activates_and_the_prompt_is_rerendered() -> None:
    skills = create_skill_registry()
    skills.register_platform(SkillSpec(name="triage", description="Triage.", body="TRIAGE BODY"))
    available = skills.summaries()
    active: set[str] = set()
    shas: dict[str, str] = {}
    seen_systems: list[str] = []

    def render(instructions: SkillInstructions) -> None:
        text = "You are helpful.\n" + "\n".join(s.body for s in instructions.skills)
        h.state.messages[0] = SystemMessage(content=text)

    activation = create_skill_activation(
        available_skills=available, active_skills=active, loaded_skill_shas=shas,
        store=lambda refs: resolve_active_skill_instructions(
            active_refs=refs, available=available, registry=skills),
        apply_instructions=render)

    def load(args: LoadSkill, ctx: None) -> ToolOutcome:
        admission = admit_skill_load(active_count=len(active))
        if not admission.admitted:
            return ToolResult(content=admission.reason or "")
        return ToolResult(content=f"loaded {args.ref}", activate_skills=(args.ref,))

    registry: ToolRegistry[ToolsPlugin[None]] = create_tool_registry()
    registry.register(plugin_from_tools(name="skills", description="", tools=[
        define_tool(name="load_skill", description="Load a skill.", args=LoadSkill, execute=load)]))

    async def dispatch(call: ToolCall) -> ToolOutcome:
        return await registry.run_tool_call(call, None, ["skills"])

    async def model_spy(messages: Sequence[Message], request: ModelRequest) -> Any:
        first = messages[0]
        seen_systems.append(first.content if isinstance(first, SystemMessage) else "")
        return await inner.complete(messages, request)

    h = loop_harness(
        [tool_call_turn([tool_call("load_skill", {"ref": "platform:triage"})]), final_answer("ok")],
        runner=ToolRunner(
            run_tool_call=dispatch,
            runs_serially=lambda call: call.name == "load_skill",
        ),
        hooks=LoopHooks(activate=lambda kind, names: activation.activate(names)),
    )
    inner = h.params.model
    h.state.messages.insert(0, SystemMessage(content="You are helpful.\n"))
    h.params = msgspec.structs.replace(h.params, model=function_model(model_spy))
    result = await run_tool_loop(h.params)
    assert result.stop_reason == "done"
    assert active == {"platform:triage"}
    assert shas == {"platform:triage": available[0].content_sha}
    assert "TRIAGE BODY" not in seen_systems[0] and "TRIAGE BODY" in seen_systems[1]
