"""Peer half of the loop-overhead benchmark: the same scripted workload run by other agent harnesses.

Workload (identical for every runner): a scripted model that, on turns 1..N-1, asks for exactly one
call ``add(a=t, b=1)`` (arguments arrive as JSON text, as a real provider sends them) and on turn N
answers with the text ``"done"``. The tool is a plain synchronous ``def`` returning ``a + b``. Each
runner asserts that the model was called N times, that ``add`` ran N-1 times, that every model turn
after the first saw the previous tool result at the tail of its input (checked in O(1)), and that the
run's final output is ``"done"``.

Every runner's time is **CPU time** (``time.process_time``: the whole process, every thread), so a
busy machine does not inflate one row more than another; bindloop's own row is one of the runners,
measured the same way in its own interpreter. Each runner builds a fresh agent, model and tool
(untimed) and then times only the run call itself
(``Agent.run`` / ``Runner.run`` / ``ToolCallingAgent.run``); for the async frameworks the timer is
inside the coroutine, so event-loop start-up is not counted. There is no ``gc.collect()`` before a
run: collections triggered by earlier runs' garbage count, as they would in a long-lived process, and
a forced collection would cold-start the caches (it tripled the bare loop's N=10 figure). Fake models
do not convert the transcript to any wire format and report a constant token usage, so no framework
has to estimate tokens. Each row runs in its own interpreter (the default of ``main``): after the
three frameworks are imported a process tracks ~240k objects, so any full GC collection that lands in
a run is expensive (seen: bare loop at N=1000, median 2.9 -> 7.0 µs/turn). Microsecond-scale figures
also drift by up to ~1.5x between interpreter launches on a 2-core VM; compare bindloop with the bare
loop measured in the same process, not across launches.

Fake-model mechanisms used (each framework's sanctioned one):

* pydantic-ai: ``pydantic_ai.models.function.FunctionModel`` with an ``async`` function (a plain ``def``
  would be pushed to a worker thread on every turn), ``UsageLimits(request_limit=None)``.
* openai-agents: a ``agents.models.interface.Model`` subclass, ``RunConfig(model=...,
  tracing_disabled=True)`` and ``set_tracing_disabled(True)``.
* smolagents: a ``smolagents.models.Model`` subclass returning ``ChatMessage`` with ``tool_calls``;
  ``ToolCallingAgent(verbosity_level=LogLevel.OFF)``. smolagents has no plain-text final answer for a
  tool-calling agent: turn N is a call to its built-in ``final_answer`` tool, which is how that
  framework ends a run (so ``add`` still runs exactly N-1 times).

Usage::

    .venv/bin/python bench/peers.py --ns 10,100,1000 --max-seconds 60
    .venv/bin/python -m bench.peers --only smolagents --ns 10 --in-process --json
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.metadata
import importlib.util
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

RunOnce = Callable[[int], float]
"""``run_once(n_turns) -> total wall seconds`` of one complete agent run."""

FINAL_TEXT = "done"

# Environment for the frameworks: nothing may reach a hub, a tracing exporter or a telemetry endpoint.
_OFFLINE_ENV = {
    "HF_HUB_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "OPENAI_AGENTS_DISABLE_TRACING": "1",
    "OTEL_SDK_DISABLED": "true",
}


class PeerUnavailable(RuntimeError):
    """The framework behind a peer runner is not installed."""


@dataclass(frozen=True)
class _PeerSpec:
    module: str
    distributions: tuple[str, ...]


_SPECS: dict[str, _PeerSpec] = {
    "pydantic-ai": _PeerSpec("pydantic_ai", ("pydantic-ai-slim", "pydantic-ai")),
    "openai-agents": _PeerSpec("agents", ("openai-agents",)),
    "smolagents": _PeerSpec("smolagents", ("smolagents",)),
}


@dataclass
class _Script:
    """The scripted model's state plus the counters every runner checks at the end."""

    n_turns: int
    turns: int = 0
    add_calls: int = 0

    def __post_init__(self) -> None:
        if self.n_turns < 1:
            raise ValueError(f"n_turns must be >= 1, got {self.n_turns}")

    def next_turn(self) -> int:
        """Advance to the next model turn and return its number (1-based)."""
        self.turns += 1
        if self.turns > self.n_turns:
            raise AssertionError(f"model called {self.turns} times, script has {self.n_turns} turns")
        return self.turns

    def is_final(self, turn: int) -> bool:
        return turn >= self.n_turns

    @staticmethod
    def arguments(turn: int) -> str:
        """JSON arguments of turn ``turn``'s ``add`` call; its result is ``turn + 1``."""
        return f'{{"a": {turn}, "b": 1}}'

    @staticmethod
    def call_id(turn: int) -> str:
        return f"call_{turn}"

    def verify(self, output: object) -> None:
        if output != FINAL_TEXT:
            raise AssertionError(f"final output {output!r}, expected {FINAL_TEXT!r}")
        if self.turns != self.n_turns or self.add_calls != self.n_turns - 1:
            raise AssertionError(
                f"expected {self.n_turns} turns and {self.n_turns - 1} add calls, "
                f"got {self.turns} turns and {self.add_calls} add calls"
            )


def _prepare(name: str) -> None:
    """Fail with PeerUnavailable if ``name`` is not installed; set the offline environment."""
    status = available_peers()[name]
    if status.startswith("missing"):
        raise PeerUnavailable(f"{name}: {status}")
    for key, value in _OFFLINE_ENV.items():
        os.environ.setdefault(key, value)


# --------------------------------------------------------------------------------------------------
# reference: a bare Python loop over plain dict messages


def bare_loop_run_once(n_turns: int) -> float:
    """The same workload as a minimal hand-written loop: dict messages, JSON arguments, one tool call."""
    script = _Script(n_turns)

    def add(a: int, b: int) -> int:
        script.add_calls += 1
        return a + b

    tools: dict[str, Callable[..., Any]] = {"add": add}

    def model(messages: list[dict[str, Any]]) -> dict[str, Any]:
        turn = script.next_turn()
        if turn > 1:
            last = messages[-1]
            assert last["role"] == "tool" and last["content"] == str(turn), last
        if script.is_final(turn):
            return {"role": "assistant", "content": FINAL_TEXT}
        return {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": script.call_id(turn),
                    "type": "function",
                    "function": {"name": "add", "arguments": script.arguments(turn)},
                }
            ],
        }

    start = time.process_time()
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    while True:
        reply = model(messages)
        messages.append(reply)
        tool_calls = reply.get("tool_calls")
        if not tool_calls:
            break
        for call in tool_calls:
            function = call["function"]
            result = tools[function["name"]](**json.loads(function["arguments"]))
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": str(result)})
    elapsed = time.process_time() - start
    script.verify(messages[-1]["content"])
    return elapsed


# --------------------------------------------------------------------------------------------------
# pydantic-ai


def pydantic_ai_run_once(n_turns: int) -> float:
    _prepare("pydantic-ai")
    from pydantic_ai import Agent
    from pydantic_ai.messages import (
        ModelMessage,
        ModelRequest,
        ModelResponse,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
    )
    from pydantic_ai.models.function import AgentInfo, FunctionModel
    from pydantic_ai.usage import RequestUsage, UsageLimits

    script = _Script(n_turns)

    async def scripted(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        turn = script.next_turn()
        if turn > 1:
            last = messages[-1]
            assert isinstance(last, ModelRequest), last
            part = last.parts[-1]
            assert isinstance(part, ToolReturnPart) and part.content == turn, part
            assert part.tool_call_id == script.call_id(turn - 1), part
        usage = RequestUsage(input_tokens=1, output_tokens=1)
        if script.is_final(turn):
            return ModelResponse(parts=[TextPart(FINAL_TEXT)], usage=usage)
        call = ToolCallPart("add", script.arguments(turn), tool_call_id=script.call_id(turn))
        return ModelResponse(parts=[call], usage=usage)

    agent = Agent(FunctionModel(scripted))

    @agent.tool_plain
    def add(a: int, b: int) -> int:
        """Add two integers."""
        script.add_calls += 1
        return a + b

    async def timed() -> tuple[float, object]:
        start = time.process_time()
        result = await agent.run("go", usage_limits=UsageLimits(request_limit=None))
        return time.process_time() - start, result.output

    elapsed, output = asyncio.run(timed())
    script.verify(output)
    return elapsed


# --------------------------------------------------------------------------------------------------
# openai-agents


def openai_agents_run_once(n_turns: int) -> float:
    _prepare("openai-agents")
    from agents import Agent, RunConfig, Runner, function_tool, set_tracing_disabled
    from agents.items import ModelResponse
    from agents.models.interface import Model
    from agents.usage import Usage
    from openai.types.responses import (
        ResponseFunctionToolCall,
        ResponseOutputMessage,
        ResponseOutputText,
    )

    set_tracing_disabled(True)
    script = _Script(n_turns)

    class ScriptedModel(Model):
        async def get_response(
            self, system_instructions: str | None, input: str | list[Any], *args: Any, **kwargs: Any
        ) -> ModelResponse:
            turn = script.next_turn()
            if turn > 1:
                assert isinstance(input, list), input
                last = input[-1]
                assert last.get("type") == "function_call_output", last
                assert last.get("call_id") == script.call_id(turn - 1), last
                assert last.get("output") == str(turn), last
            usage = Usage(requests=1, input_tokens=1, output_tokens=1, total_tokens=2)
            output: list[Any]
            if script.is_final(turn):
                text = ResponseOutputText(type="output_text", text=FINAL_TEXT, annotations=[])
                output = [
                    ResponseOutputMessage(
                        id=f"msg_{turn}", type="message", role="assistant", status="completed", content=[text]
                    )
                ]
            else:
                output = [
                    ResponseFunctionToolCall(
                        type="function_call",
                        id=f"fc_{turn}",
                        call_id=script.call_id(turn),
                        name="add",
                        arguments=script.arguments(turn),
                    )
                ]
            return ModelResponse(output=output, usage=usage, response_id=None)

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError("the benchmark runs non-streamed")

    @function_tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        script.add_calls += 1
        return a + b

    agent: Agent[Any] = Agent(name="bench", instructions="Add numbers.", tools=[add])
    config = RunConfig(model=ScriptedModel(), tracing_disabled=True)

    async def timed() -> tuple[float, object]:
        start = time.process_time()
        result = await Runner.run(agent, "go", max_turns=n_turns + 5, run_config=config)
        return time.process_time() - start, result.final_output

    elapsed, output = asyncio.run(timed())
    script.verify(output)
    return elapsed


# --------------------------------------------------------------------------------------------------
# smolagents


def smolagents_run_once(n_turns: int) -> float:
    _prepare("smolagents")
    from smolagents import LogLevel, ToolCallingAgent, tool  # type: ignore[import-untyped]
    from smolagents.models import (  # type: ignore[import-untyped]
        ChatMessage,
        ChatMessageToolCall,
        ChatMessageToolCallFunction,
        MessageRole,
        Model,
    )
    from smolagents.monitoring import TokenUsage  # type: ignore[import-untyped]

    script = _Script(n_turns)

    class ScriptedModel(Model):  # type: ignore[misc]
        def generate(self, messages: list[Any], *args: Any, **kwargs: Any) -> ChatMessage:
            turn = script.next_turn()
            if turn > 1:
                last = messages[-1]
                assert last.role == MessageRole.TOOL_RESPONSE, last
                assert last.content[-1]["text"].endswith(f"\n{turn}"), last
            if script.is_final(turn):
                name, arguments = "final_answer", json.dumps({"answer": FINAL_TEXT})
            else:
                name, arguments = "add", script.arguments(turn)
            call = ChatMessageToolCall(
                function=ChatMessageToolCallFunction(name=name, arguments=arguments),
                id=script.call_id(turn),
                type="function",
            )
            return ChatMessage(
                role=MessageRole.ASSISTANT,
                content=None,
                tool_calls=[call],
                token_usage=TokenUsage(input_tokens=1, output_tokens=1),
            )

    @tool  # type: ignore[untyped-decorator]
    def add(a: int, b: int) -> int:
        """Add two integers.

        Args:
            a: The first addend.
            b: The second addend.
        """
        script.add_calls += 1
        return a + b

    agent = ToolCallingAgent(
        tools=[add],
        model=ScriptedModel(model_id="scripted"),
        max_steps=n_turns + 5,
        verbosity_level=LogLevel.OFF,
    )
    start = time.process_time()
    output = agent.run("go")
    elapsed = time.process_time() - start
    script.verify(output)
    return elapsed


# --------------------------------------------------------------------------------------------------
# public API

PEERS: dict[str, RunOnce] = {
    "pydantic-ai": pydantic_ai_run_once,
    "openai-agents": openai_agents_run_once,
    "smolagents": smolagents_run_once,
}
"""Every peer runner; a runner whose framework is missing raises PeerUnavailable (see available_peers)."""

def bindloop_run_once(n_turns: int) -> float:
    """bindloop's own row: ``bench/loop_overhead.py``'s workload (the same script), CPU seconds."""
    import loop_overhead

    return loop_overhead.bindloop_run_once(n_turns)


REFERENCE: dict[str, RunOnce] = {"bindloop": bindloop_run_once,
                                 "bare python loop": bare_loop_run_once}


def available_peers() -> dict[str, str]:
    """Peer name -> installed version, or a reason starting with ``"missing"``. Imports nothing."""
    status: dict[str, str] = {}
    for name, spec in _SPECS.items():
        version: str | None = None
        for distribution in spec.distributions:
            try:
                version = importlib.metadata.version(distribution)
                break
            except importlib.metadata.PackageNotFoundError:
                continue
        if version is None:
            status[name] = f"missing: none of {', '.join(spec.distributions)} is installed"
        elif importlib.util.find_spec(spec.module) is None:
            status[name] = f"missing: module {spec.module!r} not importable"
        else:
            status[name] = version
    return status


def runnable_peers() -> dict[str, RunOnce]:
    """The subset of PEERS whose framework is installed."""
    status = available_peers()
    return {name: fn for name, fn in PEERS.items() if not status[name].startswith("missing")}


def measure(fn: RunOnce, n: int, repeats: int) -> float:
    """Run ``fn(n)`` ``repeats`` times; return the median CPU time per turn in microseconds."""
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    return statistics.median(fn(n) for _ in range(repeats)) / n * 1e6


@contextlib.contextmanager
def no_network() -> Iterator[list[str]]:
    """Make outgoing connections and DNS lookups fail fast; yields the list of attempts made."""
    attempts: list[str] = []

    def refuse(*args: Any, **kwargs: Any) -> Any:
        attempts.append(repr(args[1:] if args and isinstance(args[0], socket.socket) else args)[:100])
        raise OSError("network disabled by bench/peers.py")

    saved = (socket.socket.connect, socket.socket.connect_ex, socket.getaddrinfo, socket.create_connection)
    socket.socket.connect = refuse  # type: ignore[method-assign]
    socket.socket.connect_ex = refuse  # type: ignore[method-assign]
    socket.getaddrinfo = refuse
    socket.create_connection = refuse
    try:
        yield attempts
    finally:
        socket.socket.connect, socket.socket.connect_ex = saved[0], saved[1]  # type: ignore[method-assign]
        socket.getaddrinfo, socket.create_connection = saved[2], saved[3]


# --------------------------------------------------------------------------------------------------
# rows, tables and the command line


@dataclass
class Cell:
    """One table cell: a median in µs/turn, or why there is none."""

    us_per_turn: float | None = None
    note: str = ""
    runs: int = 0
    seconds: float = 0.0

    def render(self) -> str:
        return f"{self.us_per_turn:,.1f}" if self.us_per_turn is not None else self.note


@dataclass
class Row:
    """One table row: a runner's cells for each N, or why it has none (``missing: ...`` / ``error: ...``)."""

    name: str
    version: str = ""
    cells: list[Cell] = field(default_factory=list)
    problem: str = ""

    @property
    def label(self) -> str:
        return f"{self.name} {self.version}" if self.version else self.name

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Row:
        return cls(
            name=data["name"],
            version=data["version"],
            cells=[Cell(**cell) for cell in data["cells"]],
            problem=data["problem"],
        )


def measure_cell(fn: RunOnce, n: int, *, max_seconds: float, cell_seconds: float, max_repeats: int) -> Cell:
    """The first run decides: over ``max_seconds`` -> skipped; else repeat within ``cell_seconds`` of runs."""
    first = fn(n)
    if first > max_seconds:
        return Cell(note="skipped", runs=1, seconds=first)
    repeats = max(1, min(max_repeats, int(cell_seconds / max(first, 1e-9))))
    samples = [first] + [fn(n) for _ in range(repeats - 1)]
    return Cell(statistics.median(samples) / n * 1e6, runs=len(samples), seconds=sum(samples))


def measure_row(
    name: str, ns: list[int], *, max_seconds: float = 90.0, cell_seconds: float = 3.0, max_repeats: int = 25
) -> Row:
    """Measure one runner (a PEERS or REFERENCE name) in this process.

    After a warm-up run (lazy imports, schema building, first-call caches), the cells run in the
    order of ``ns``; once a cell is skipped, larger N are skipped without running.
    """
    runners = {**REFERENCE, **PEERS}
    if name not in runners:
        raise KeyError(f"unknown runner {name!r}; choose from {sorted(runners)}")
    row = Row(name)
    if name in PEERS:
        status = available_peers()[name]
        if status.startswith("missing"):
            row.problem = status
            return row
        row.version = status
    fn = runners[name]
    try:
        fn(min(3, *ns))
        for n in ns:
            if row.cells and row.cells[-1].note == "skipped":
                row.cells.append(Cell(note="skipped"))
                continue
            cell = measure_cell(fn, n, max_seconds=max_seconds, cell_seconds=cell_seconds, max_repeats=max_repeats)
            row.cells.append(cell)
            print(f"# {row.label} N={n}: {cell.runs} run(s) in {cell.seconds:.2f}s", file=sys.stderr, flush=True)
    except Exception as exc:  # a broken runner is a row of the report, not the end of it
        first_line = (str(exc).strip().splitlines() or [""])[0]
        row.problem = f"error: {type(exc).__name__}: {first_line}"[:120]
    return row


def measure_row_isolated(
    name: str, ns: list[int], *, max_seconds: float = 90.0, cell_seconds: float = 3.0, max_repeats: int = 25
) -> Row:
    """``measure_row`` in a fresh interpreter, so no runner pays for another framework's heap.

    The child's progress lines go to this process's stderr; its row comes back as JSON on stdout.
    """
    command = [
        sys.executable,
        os.path.abspath(__file__),
        "--only",
        name,
        "--ns",
        ",".join(map(str, ns)),
        "--max-seconds",
        str(max_seconds),
        "--cell-seconds",
        str(cell_seconds),
        "--max-repeats",
        str(max_repeats),
        "--in-process",
        "--json",
    ]
    done = subprocess.run(command, stdout=subprocess.PIPE, text=True, check=False)
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        return Row(name, problem=f"error: subprocess exited with {done.returncode}")
    return Row.from_json(json.loads(lines[-1])[0])


def format_table(ns: list[int], rows: list[Row]) -> str:
    """A Markdown table: one row per runner, one column per N, cells in µs/turn."""
    header = ["framework", *(f"N={n} µs/turn" for n in ns)]
    body = [
        [row.label, row.problem, *[""] * (len(ns) - 1)]
        if row.problem
        else [row.label, *(c.render() for c in row.cells)]
        for row in rows
    ]
    widths = [max(len(line[i]) for line in [header, *body]) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        first, *rest = cells
        return (
            "| "
            + " | ".join([first.ljust(widths[0]), *(c.rjust(w) for c, w in zip(rest, widths[1:], strict=True))])
            + " |"
        )

    rule = "|" + "|".join("-" * (w + 2) if i == 0 else "-" * (w + 1) + ":" for i, w in enumerate(widths)) + "|"
    return "\n".join([line(header), rule, *(line(cells) for cells in body)])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Harness overhead per turn of peer agent frameworks.")
    parser.add_argument("--ns", default="10,100,1000", help="comma-separated turn counts (default: %(default)s)")
    parser.add_argument(
        "--max-seconds",
        type=float,
        default=90.0,
        help="skip a cell whose first run takes longer than this, and larger N after it (default: %(default)s)",
    )
    parser.add_argument(
        "--cell-seconds",
        type=float,
        default=3.0,
        help="repeat a cell's run while the runs total at most this many seconds (default: %(default)s)",
    )
    parser.add_argument("--max-repeats", type=int, default=25, help="runs per cell at most (default: %(default)s)")
    parser.add_argument("--only", default="", help="comma-separated runners to measure (default: all)")
    parser.add_argument("--in-process", action="store_true", help="measure every row in this process")
    parser.add_argument("--json", action="store_true", help="print the rows as one JSON line instead of a table")
    args = parser.parse_args(argv)

    ns = [int(part) for part in args.ns.split(",") if part.strip()]
    if not ns or min(ns) < 1:
        parser.error("--ns needs positive integers")
    names = [*REFERENCE, *PEERS]
    only = [part.strip() for part in args.only.split(",") if part.strip()]
    unknown = set(only) - set(names)
    if unknown:
        parser.error(f"unknown runners {sorted(unknown)}; choose from {names}")
    selected = [name for name in names if not only or name in only]
    measure_one = measure_row if args.in_process else measure_row_isolated
    options: dict[str, Any] = {
        "max_seconds": args.max_seconds,
        "cell_seconds": args.cell_seconds,
        "max_repeats": args.max_repeats,
    }

    began = time.perf_counter()
    with no_network() as attempts:
        rows = [measure_one(name, ns, **options) for name in selected]
    if attempts:
        print(f"# WARNING: {len(attempts)} blocked network attempt(s), e.g. {attempts[0]}", file=sys.stderr)
    if args.json:
        print(json.dumps([asdict(row) for row in rows]))
        return 0
    print(format_table(ns, rows))
    print(
        f"\ntotal {time.perf_counter() - began:.1f}s; python {sys.version.split()[0]}; median CPU time of one run / N"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
