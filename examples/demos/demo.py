"""``make demo``: an agent loop over a deterministic policy model with real pure tools.

The model here is a small rule-based policy (no network, no credentials) that reads the transcript
the way a real model would: it plans tool calls from the user's request and writes its answer from the
tool results it got back. The tools are real: a safe arithmetic evaluator and an in-memory notes store.
Run ``python -m examples.demos.demo --help`` for options.
"""

from __future__ import annotations

import ast
import operator
import sys
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import anyio
import msgspec

from bindloop import (
    AssistantMessage,
    Message,
    ModelTurnResult,
    RunStats,
    SystemMessage,
    ToolCall,
    ToolDefinition,
    ToolError,
    ToolLoopParams,
    ToolLoopResult,
    ToolLoopState,
    ToolMessage,
    ToolOutcome,
    ToolResult,
    TurnUsage,
    UserMessage,
    run_tool_loop,
)
from bindloop.contracts import content_text
from bindloop.completion import StreamEvent
from bindloop.loop import LoopHooks, ToolRunner
from bindloop.model import Model, ModelRequest, StreamModel, turn_events

DEFAULT_PROMPT = ("What is (17 * 23) + 4 and what is 2 ** 10 / 8? Save both results as notes, "
                  "then tell me which notes I have.")

_BINOPS: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {ast.USub: operator.neg, ast.UAdd: operator.pos}


def calculate(expression: str) -> float | int:
    """Evaluate an arithmetic expression safely (numbers, + - * / // % **, parentheses)."""
    def ev(node: ast.AST) -> Any:
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) \
                and not isinstance(node.value, bool):
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            left, right = ev(node.left), ev(node.right)
            if isinstance(node.op, ast.Pow) and abs(right) > 100:
                raise ValueError("exponent too large")
            return _BINOPS[type(node.op)](left, right)
        if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
            return _UNARY[type(node.op)](ev(node.operand))
        raise ValueError(f"unsupported syntax: {ast.dump(node)[:40]}")
    if len(expression) > 200:
        raise ValueError("expression too long")
    value = ev(ast.parse(expression, mode="eval"))
    return int(value) if isinstance(value, float) and value.is_integer() else value


class Notes:
    """An in-memory notes store (one per run, never module state)."""

    def __init__(self) -> None:
        self.items: dict[str, str] = {}

    def write(self, title: str, body: str) -> str:
        self.items[title] = body
        return f"saved note {title!r}"

    def list(self) -> list[dict[str, str]]:
        return [{"title": t, "body": b} for t, b in sorted(self.items.items())]


TOOLS = [
    ToolDefinition(name="calculator", description="Evaluate an arithmetic expression.",
                   parameters={"type": "object", "required": ["expression"],
                               "properties": {"expression": {"type": "string"}}}),
    ToolDefinition(name="notes_write", description="Save a note.",
                   parameters={"type": "object", "required": ["title", "body"],
                               "properties": {"title": {"type": "string"},
                                              "body": {"type": "string"}}}),
    ToolDefinition(name="notes_list", description="List saved notes.",
                   parameters={"type": "object", "properties": {}}),
]


def _args(**kwargs: Any) -> str:
    return msgspec.json.encode(kwargs).decode()


class PolicyModel(StreamModel):
    """A deterministic stand-in for a model: plans from the request, answers from the results."""

    id = "policy"

    def __init__(self) -> None:
        self.turn = 0

    async def stream(self, messages: Sequence[Message],
                     request: ModelRequest, /) -> AsyncIterator[StreamEvent]:
        for event in turn_events(await self.complete(messages, request)):
            yield event

    def _usage(self, messages: Sequence[Message], out: int) -> TurnUsage:
        # A rough token count (4 characters a token) so the stats have something honest to show.
        chars = sum(len(msgspec.json.encode(m)) for m in messages)
        return TurnUsage(input_tokens=chars // 4, output_tokens=out,
                         cached_input_tokens=(chars // 4) // 2 if self.turn > 1 else 0)

    async def complete(self, messages: Sequence[Message], request: ModelRequest, /,
                       on_event: Callable[[StreamEvent], None] | None = None,
                       on_reset: Callable[[], None] | None = None) -> ModelTurnResult:
        self.turn += 1
        asking = next(content_text(m.content) for m in reversed(messages)
                       if isinstance(m, UserMessage))
        results = {m.tool_call_id: content_text(m.content) for m in messages
                   if isinstance(m, ToolMessage)}
        asked = [c for m in messages if isinstance(m, AssistantMessage) for c in m.tool_calls]
        expressions = _expressions(asking)
        if self.turn == 1:
            calls = tuple(ToolCall(id=f"calc_{i}", name="calculator", arguments=_args(expression=e))
                          for i, e in enumerate(expressions))
            return ModelTurnResult(text=f"I'll evaluate {len(calls)} expression(s) first.",
                                   tool_calls=calls, usage=self._usage(messages, 24), cost=3)
        if self.turn == 2:
            calls = tuple(
                ToolCall(id=f"note_{i}", name="notes_write",
                         arguments=_args(title=f"result {i + 1}", body=f"{e} = {results[f'calc_{i}']}"))
                for i, e in enumerate(expressions)
            ) + (ToolCall(id="list_0", name="notes_list", arguments="{}"),)
            return ModelTurnResult(tool_calls=calls, usage=self._usage(messages, 40), cost=4)
        listed = msgspec.json.decode(results.get("list_0", "[]"))
        lines = [f"- {n['title']}: {n['body']}" for n in listed] if isinstance(listed, list) else []
        answer = ("Here is what I found:\n"
                  + "\n".join(f"  {e} = {results.get(f'calc_{i}', '?')}" for i, e in enumerate(expressions))
                  + f"\nYou have {len(lines)} note(s) ({len(asked)} tool calls made):\n"
                  + "\n".join("  " + ln for ln in lines))
        return ModelTurnResult(text=answer, usage=self._usage(messages, 60), cost=5,
                               finish_reason="stop")


def _expressions(request: str) -> list[str]:
    """The arithmetic expressions in a request: maximal runs of digits, operators and parentheses."""
    out, current = [], ""
    for ch in request + " ":
        if ch.isdigit() or ch in "+-*/%(). ":
            current += ch
        else:
            if any(c.isdigit() for c in current):
                out.append(current.strip(" ."))
            current = ""
    if any(c.isdigit() for c in current):
        out.append(current.strip(" ."))
    return [e for e in out if any(op in e for op in "+-*/%")]


def make_dispatch(notes: Notes) -> Callable[[ToolCall], ToolOutcome]:
    def dispatch(call: ToolCall) -> ToolOutcome:
        try:
            args = msgspec.json.decode(call.arguments) if call.arguments.strip() else {}
        except msgspec.DecodeError as exc:
            return ToolError(error=f"arguments are not JSON: {exc}", kind="validation")
        if not isinstance(args, dict):
            return ToolError(error="arguments must be an object", kind="validation")
        if call.name == "calculator":
            return ToolResult(content=str(calculate(str(args.get("expression", "")))))
        if call.name == "notes_write":
            return ToolResult(content=notes.write(str(args["title"]), str(args["body"])))
        if call.name == "notes_list":
            return ToolResult(content=msgspec.json.encode(notes.list()).decode())
        return ToolError(error=f"no tool named {call.name!r}", kind="not_found")
    return dispatch


def _fmt_stats(stats: RunStats) -> str:
    rows = [
        ("turns", stats.turns), ("tool calls", stats.tool_calls),
        ("input tokens", stats.input_tokens), ("cached input tokens", stats.cached_input_tokens),
        ("output tokens", stats.output_tokens), ("cost (units)", stats.cost),
        ("model time (ms)", f"{stats.model_ms:.3f}"), ("tool time (ms)", f"{stats.tool_ms:.3f}"),
    ]
    out = [f"  {k:<22}{v}" for k, v in rows]
    for name, t in stats.tools.items():
        out.append(f"    {name:<20}{t.calls} call(s), {t.ms:.3f} ms")
    return "\n".join(out)


class Narrated(StreamModel):
    """``inner``, with ``before(messages, request)`` told of each call and ``after(turn)`` of each
    answer."""

    def __init__(self, inner: Model, *,
                 before: Callable[[Sequence[Message], ModelRequest], None] | None = None,
                 after: Callable[[ModelTurnResult], None] | None = None) -> None:
        self.inner, self.before, self.after = inner, before, after
        self.id, self.provider = inner.id, inner.provider
        self.structured_output = inner.structured_output

    def stream(self, messages: Sequence[Message],
               request: ModelRequest, /) -> AsyncIterator[StreamEvent]:
        return self.inner.stream(messages, request)

    async def complete(self, messages: Sequence[Message], request: ModelRequest, /,
                       on_event: Callable[[StreamEvent], None] | None = None,
                       on_reset: Callable[[], None] | None = None) -> ModelTurnResult:
        if self.before is not None:
            self.before(messages, request)
        turn = await self.inner.complete(messages, request, on_event, on_reset)
        if self.after is not None:
            self.after(turn)
        return turn


async def run_agent(model: Model, prompt: str, write: Callable[[str], None],
                    max_iterations: int = 8, *, show_text: bool = True) -> ToolLoopResult:
    """The demo agent over any ``model``: real tools, a traced run, then the stop reason and
    stats. ``show_text=False`` when the caller already streams the assistant's text itself."""
    dispatch = make_dispatch(Notes())
    state = ToolLoopState(messages=[
        SystemMessage(content="You are a careful assistant with a calculator and a notes store."),
        UserMessage(content=prompt),
    ])

    def traced(call: ToolCall) -> ToolOutcome:
        outcome = dispatch(call)
        shown = outcome.content if isinstance(outcome, ToolResult) else outcome
        write(f"   ⚙ {call.name}({call.arguments}) → {shown}")
        return outcome

    def on_assistant(message: AssistantMessage) -> None:
        text = content_text(message.content)
        if show_text and text:
            write("   🗨 " + text.replace("\n", "\n     "))
        for call in message.tool_calls:
            write(f"   ↳ asks for {call.name} [{call.id}]")

    write(f"user: {prompt}")
    result = await run_tool_loop(ToolLoopParams(
        state=state, model=model, max_iterations=max_iterations,
        runner=ToolRunner(
            run_tool_call=traced, build_tools=lambda: TOOLS,
            # Writes run first, one at a time, so the list in the same batch sees them.
            runs_serially=lambda call: call.name == "notes_write"),
        hooks=LoopHooks(
            on_assistant_message=on_assistant,
            on_tool_call_rejected=lambda i, e: write(f"   ✗ {i}: {type(e).__name__}: {e}")),
    ))
    write(f"\nstop reason: {result.stop_reason}")
    write("run stats:\n" + _fmt_stats(result.stats))
    write(f"state totals: {state.input_tokens} in / {state.output_tokens} out tokens, "
          f"{state.requested_tool_calls} tool calls requested, {len(state.messages)} messages")
    return result


async def run_demo(prompt: str, write: Callable[[str], None], max_iterations: int = 8) -> ToolLoopResult:
    """The built-in default: the agent over the deterministic policy model."""
    turn = [0]

    def before(messages: Sequence[Message], request: ModelRequest) -> None:
        turn[0] += 1
        write(f"\n── turn {turn[0]} ─ model sees {len(messages)} messages, "
              f"{len(request.tools)} tools")

    return await run_agent(Narrated(PolicyModel(), before=before), prompt, write, max_iterations)


def main(argv: list[str] | None = None) -> int:
    # Imported here: the browser page imports this module for its tools, and argparse is the
    # largest import it would otherwise pay for (Pyodide compiles the standard library's sources).
    import argparse

    parser = argparse.ArgumentParser(prog="bindloop-demo", description=__doc__)
    parser.add_argument("prompt", nargs="?", default=DEFAULT_PROMPT)
    parser.add_argument("--max-iterations", type=int, default=8)
    args = parser.parse_args(argv)

    def write(line: str) -> None:
        print(line)

    result = anyio.run(run_demo, args.prompt, write, args.max_iterations)
    return 0 if result.stop_reason == "done" else 1


if __name__ == "__main__":
    sys.exit(main())
