# Tools from plain functions, the same under CPython (tests/tools/test_pyodide_function_tools.py)
# and under Pyodide 314 in Node (harness/wasm/run_smoke.mjs): what define_tool derives, what the tools
# answer, what an agent run over a scripted model reads, and what is refused, as one JSON text.
# No `from __future__ import annotations`: on Python 3.14 annotations are deferred, and this file
# checks define_tool reads them there too. Its value is the last expression, as run_smoke prints it.
import sys
from typing import Annotated, Any, Literal

import msgspec

from bindloop.agent import create_agent, equip_instruction, equip_tool, prompt_chat
from bindloop.contracts import ToolMessage, ToolSuspend
from bindloop.errors import UsageError
from bindloop.tools import ToolContext, define_tool
from bindloop.testing import final_answer, scripted_stream_model, tool_call, tool_call_turn


class Point(msgspec.Struct):
    x: int
    y: int = 0


@define_tool
async def search(query: Annotated[str, msgspec.Meta(min_length=1)], ctx: ToolContext,
                 limit: Annotated[int, "How many at most"] = 3,
                 order: Literal["score", "date"] = "score", near: Point | None = None) -> dict:
    """Search the corpus.

    Args:
        query: What to look for.
        order: How to sort.
    """
    return {"q": query, "limit": limit, "order": order, "near": near, "call": ctx.call_id}


@define_tool
def ask(question: str) -> ToolSuspend:
    """Ask the user.

    Parameters
    ----------
    question : str
        The question.
    """
    return ToolSuspend(mode="waiting_for_reply", detail=question)


def weather(city: str, *, days: int = 1) -> str:
    """Weather for a city.

    :param city: The city.
    """
    return f"sunny in {city} for {days} day(s)"


def _refused(fn: Any) -> str:
    try:
        define_tool(fn)
    except UsageError as exc:
        return str(exc)
    return "accepted"


def untyped(x, y: int) -> str:  # type: ignore[no-untyped-def]  # x has no hint: refused
    return ""


def star(*names: str) -> str:
    return ""


if sys.version_info >= (3, 14):  # deferred: the annotation is evaluated when define_tool reads it
    scope: dict[str, Any] = {}
    exec("def unresolved(x: Missing) -> str:\n    return ''\n", scope)
    unresolved = scope["unresolved"]
else:
    def unresolved(x: "Missing") -> str:  # type: ignore[name-defined]  # noqa: F821
        return ""


async def _main() -> str:
    ctx = ToolContext("search", "", {}, "", "c0", None)
    out: dict[str, Any] = {
        "python_at_least_3_11": sys.version_info >= (3, 11),
        "definitions": [[t.name, t.description, t.parameters] for t in (search, ask,
                                                                          define_tool(weather))],
        "search": msgspec.to_builtins(await search.execute('{"query": "bind", "near": {"x": 1}}',
                                                           ctx)),
        "bad": msgspec.to_builtins(await search.execute('{"query": ""}', ctx)),
        "refused": [
            "'x'" in _refused(untyped) and "no type hint" in _refused(untyped),
            "*names" in _refused(star),
            "'x'" in _refused(unresolved) and "Missing" in _refused(unresolved),
        ],
    }
    model = scripted_stream_model([
        tool_call_turn([tool_call("weather", {"city": "Lisbon", "days": 2}, id="c1"),
                        tool_call("search", {"query": "rain"}, id="c2")]),
        final_answer("Sunny."),
    ])

    async def handler(question: str) -> Any:
        equip_instruction(question)
        equip_tool(weather)
        equip_tool(search)
        return await prompt_chat()

    result = await create_agent(id="a", handler=handler, model=model)("Weather?")
    out["agent"] = [result.data, [m.content for m in model.requests[1].messages
                                  if isinstance(m, ToolMessage)]]
    return msgspec.json.encode(out, order="deterministic").decode()


await _main()  # noqa: F704 - run_smoke's top-level await; the CPython test awaits _main itself
