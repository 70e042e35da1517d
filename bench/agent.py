"""The agent layer's overhead per turn, side by side with peers.

Workload: a scripted model asks for one ``add(a=t, b=1)`` call on turns 1..N-1 and answers on turn
N with a structured object ``{"total": N, "note": "done"}`` that is decoded into a typed value.
Runners:

* ``bare loop``: ``bindloop.run_tool_loop`` with a model returning whole turns, the final
  text decoded with msgspec — the floor the agent layer is measured against.
* ``bare (stream)``: the same loop over the streaming model below, each turn folded by the engine's
  ``TurnCollector`` — the floor for the agent's streamed path (the fold is engine work any
  ``run_tool_loop`` user of a streaming model does).
* ``agent API``: ``run_with(agent, model=...)`` of one ``create_agent`` (defined once, reused) with
  ``equip_tool(define_tool(...))`` + ``prompt_agent(Final)`` over
  a :class:`~bindloop.model.StreamModel` that streams each turn as events (what every real model
  does), in native JSON-schema mode; no stream consumer, no trace, no snapshot.
* ``agent (whole)``: the same, over a model whose own ``complete`` returns whole turns (as
  the wire's ``ModelAdapter`` does), which the agent uses when nothing watches the stream.
* ``agent (snapshot)``: the streamed agent with ``enable_snapshot=True`` (each turn journaled
  with its prompt hash, as with a trace or a replay).
* ``agent (public kit)``: the agent as users and their tests run it — ``run_with`` over
  ``bindloop.testing.scripted_stream_model`` (the script from ``tool_call_turn`` /
  ``final_answer``) and one tool from a plain function (``@define_tool``); its ratio to the bare
  loop is printed on its own line (target <= 1.7x at N=300), and again as read with the two
  run alternately, pair by pair (the median of the pairs' ratios: the target's reading).
* ``pydantic-ai`` (``Agent(FunctionModel, output_type=Final)``, the final answer through its output
  tool) and ``openai-agents`` (``Runner.run`` with a ``Model`` subclass, ``output_type=Final``):
  extra ``bench``; each runs in its own interpreter (``--peers``), as in ``bench/peers.py``.

Reported: CPU µs per turn (median over repeats), and each runner's ratio to the bare loop measured in the
same run; "added" is the agent API's µs/turn minus the bare loop's ("over stream": minus the bare
streamed loop's). Target: <= 10 µs/turn added, flat in N.

``--before DIR`` compares with a checkout of the base commit instead (its sources and its own
``bench/agent.py``): every runner in a fresh interpreter, before and after interleaved for
``--rounds`` rounds, the median over rounds, ratio = after / before.

    python bench/agent.py [--ns 10,100,1000] [--peers] [--budget 2.0]
    git archive <base> | tar -x -C /tmp/base && python bench/agent.py --before /tmp/base
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import anyio
import msgspec

from bindloop import Message, ModelTurnResult, ToolCall, ToolDefinition, ToolLoopParams, \
    ToolLoopState, ToolOutcome, ToolResult, TurnUsage, UserMessage, run_tool_loop
from bindloop.agent import (
    create_agent,
    equip_instruction,
    equip_tool,
    prompt_agent,
    run_with,
)
from bindloop.completion import FinishEvent, StreamEvent, TextEvent, ToolCallChunk, \
    ToolCallEvent, UsageEvent
from bindloop.loop import ToolRunner
from bindloop.tools import define_tool
from bindloop.testing import final_answer, scripted_stream_model, tool_call, tool_call_turn

try:
    from bindloop.model import StreamModel as _ModelBase
except ImportError:  # ``--before`` runs this file's engine-only runner over an older checkout
    _ModelBase = object  # type: ignore[assignment,misc]

RunOnce = Callable[[int], float]
# CPU seconds of this process: on a shared machine other processes' load does not count (the
# runners are single-threaded and never wait on I/O, so CPU time is their whole cost).
_clock = time.process_time


class Final(msgspec.Struct):
    total: int
    note: str


class AddArgs(msgspec.Struct):
    a: int
    b: int


def _final_json(n: int) -> str:
    return f'{{"total": {n}, "note": "done"}}'


def _check(value: Any, n: int, added: int) -> None:
    total = value.total if not isinstance(value, dict) else value["total"]
    note = value.note if not isinstance(value, dict) else value["note"]
    assert (total, note) == (n, "done"), value
    assert added == n - 1, (added, n)


_ARGS = msgspec.json.Decoder(AddArgs)
_FINAL = msgspec.json.Decoder(Final)
ADD = ToolDefinition(name="add", description="Add two integers.",
                     parameters={"type": "object", "required": ["a", "b"],
                                 "properties": {"a": {"type": "integer"},
                                                "b": {"type": "integer"}}})


def bare_loop_run_once(n: int) -> float:
    added = [0]
    turn = [0]

    class Bare(_ModelBase):
        id = "bare"

        async def complete(self, messages: Sequence[Message], request: Any, /,
                           on_event: Any = None, on_reset: Any = None) -> ModelTurnResult:
            turn[0] += 1
            i = turn[0]
            if i < n:
                return ModelTurnResult(tool_calls=(ToolCall(id=f"call_{i}", name="add",
                                                            arguments=f'{{"a":{i},"b":1}}'),),
                                       usage=TurnUsage(input_tokens=1, output_tokens=1))
            return ModelTurnResult(text=_final_json(n), usage=TurnUsage(input_tokens=1,
                                                                        output_tokens=1))

    def add(call: ToolCall) -> ToolOutcome:
        args = _ARGS.decode(call.arguments)
        added[0] += 1
        return ToolResult(content=str(args.a + args.b))

    state = ToolLoopState(messages=[UserMessage(content="add things")])
    params = ToolLoopParams(state=state, model=Bare(), max_iterations=n + 1,
                            runner=ToolRunner(run_tool_call=add, build_tools=lambda: [ADD]))

    async def main() -> float:
        started = _clock()
        result = await run_tool_loop(params)
        final = _FINAL.decode(state.messages[-1].content)  # type: ignore[arg-type]
        elapsed = _clock() - started
        assert result.stop_reason == "done"
        _check(final, n, added[0])
        return elapsed

    return anyio.run(main)


class _StreamModel(_ModelBase):
    """A model streaming each scripted turn as events, one fragment each (its ``complete`` is
    ``StreamModel``'s fold of this stream)."""

    structured_output = "json_schema"

    def __init__(self, n: int) -> None:
        self.id, self.provider = "bench", "bench"
        self.n = n
        self.turn = 0

    async def stream(self, messages: Sequence[Message],
                     request: Any, /) -> AsyncIterator[StreamEvent]:
        self.turn += 1
        i = self.turn
        if i < self.n:
            yield ToolCallEvent(tool_call=ToolCallChunk(index=0, id=f"call_{i}", name="add",
                                                        arguments=f'{{"a":{i},"b":1}}'))
            yield UsageEvent(usage=TurnUsage(input_tokens=1, output_tokens=1))
            yield FinishEvent(finish_reason="tool_calls")
        else:
            yield TextEvent(content=_final_json(self.n))
            yield UsageEvent(usage=TurnUsage(input_tokens=1, output_tokens=1))
            yield FinishEvent(finish_reason="stop")


class _WholeTurnModel(_StreamModel):
    """The same script, its own ``complete`` returning whole turns (nothing observes the stream
    here, so it is never asked to hand events on)."""

    async def complete(self, messages: Sequence[Message], request: Any, /,
                       on_event: Callable[[StreamEvent], None] | None = None,
                       on_reset: Callable[[], None] | None = None) -> ModelTurnResult:
        self.turn += 1
        i = self.turn
        usage = TurnUsage(input_tokens=1, output_tokens=1)
        if i < self.n:
            return ModelTurnResult(tool_calls=(ToolCall(id=f"call_{i}", name="add",
                                                        arguments=f'{{"a":{i},"b":1}}'),),
                                   usage=usage, finish_reason="tool_calls")
        return ModelTurnResult(text=_final_json(self.n), usage=usage, finish_reason="stop")


_ADDED = [0]


async def _add(args: AddArgs, ctx: object) -> ToolResult:
    _ADDED[0] += 1
    return ToolResult(content=str(args.a + args.b))


_ADD_TOOL = define_tool(name="add", description="Add two integers.", args=AddArgs, execute=_add)


async def _bench_handler(n: int) -> Final:
    equip_instruction("add things")
    equip_tool(_ADD_TOOL)
    return await prompt_agent(Final, max_turn_steps=n + 1)


# Defined once and reused, as agents are in an application (pydantic-ai's Agent likewise builds
# its output schema when it is constructed, outside the timed run). Each run gets a fresh model.
_AGENT = create_agent(id="bench", handler=_bench_handler)


def agent_api_run_once(n: int, model_type: type[_StreamModel] = _StreamModel,
                       enable_snapshot: bool = False) -> float:
    _ADDED[0] = 0
    added = _ADDED
    model = model_type(n)

    async def main() -> float:
        started = _clock()
        final = await run_with(_AGENT, initial_props=n, model=model,
                               enable_snapshot=enable_snapshot)
        elapsed = _clock() - started
        _check(final, n, added[0])
        return elapsed

    return anyio.run(main)


def pydantic_ai_run_once(n: int) -> float:
    import pydantic
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelMessage, ModelResponse, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel
    from pydantic_ai.usage import RequestUsage, UsageLimits

    class PFinal(pydantic.BaseModel):
        total: int
        note: str

    added = [0]
    turn = [0]

    async def scripted(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        turn[0] += 1
        i = turn[0]
        usage = RequestUsage(input_tokens=1, output_tokens=1)
        if i < n:
            return ModelResponse(parts=[ToolCallPart("add", f'{{"a":{i},"b":1}}',
                                                     tool_call_id=f"call_{i}")], usage=usage)
        out = info.output_tools[0].name
        return ModelResponse(parts=[ToolCallPart(out, _final_json(n), tool_call_id="final")],
                             usage=usage)

    agent = Agent(FunctionModel(scripted), output_type=PFinal)

    @agent.tool_plain
    def add(a: int, b: int) -> int:
        """Add two integers."""
        added[0] += 1
        return a + b

    async def timed() -> tuple[float, Any]:
        started = _clock()
        result = await agent.run("add things", usage_limits=UsageLimits(request_limit=None))
        return _clock() - started, result.output

    elapsed, output = asyncio.run(timed())
    _check(output, n, added[0])
    return elapsed


def openai_agents_run_once(n: int) -> float:
    import pydantic
    from agents import Agent, RunConfig, Runner, function_tool, set_tracing_disabled
    from agents.items import ModelResponse
    from agents.models.interface import Model
    from agents.usage import Usage
    from openai.types.responses import (
        ResponseFunctionToolCall,
        ResponseOutputMessage,
        ResponseOutputText,
    )

    class OFinal(pydantic.BaseModel):
        total: int
        note: str

    set_tracing_disabled(True)
    added = [0]
    turn = [0]

    class Scripted(Model):
        async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
            turn[0] += 1
            i = turn[0]
            usage = Usage(requests=1, input_tokens=1, output_tokens=1, total_tokens=2)
            output: list[Any]
            if i < n:
                output = [ResponseFunctionToolCall(type="function_call", id=f"fc_{i}",
                                                   call_id=f"call_{i}", name="add",
                                                   arguments=f'{{"a":{i},"b":1}}')]
            else:
                text = ResponseOutputText(type="output_text", text=_final_json(n),
                                          annotations=[])
                output = [ResponseOutputMessage(id="msg", type="message", role="assistant",
                                                status="completed", content=[text])]
            return ModelResponse(output=output, usage=usage, response_id=None)

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError

    @function_tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        added[0] += 1
        return a + b

    agent: Agent[Any] = Agent(name="bench", instructions="Add.", tools=[add], output_type=OFinal)
    config = RunConfig(model=Scripted(), tracing_disabled=True)

    async def timed() -> tuple[float, Any]:
        started = _clock()
        result = await Runner.run(agent, "add things", max_turns=n + 5, run_config=config)
        return _clock() - started, result.final_output

    elapsed, output = asyncio.run(timed())
    _check(output, n, added[0])
    return elapsed


def agent_whole_turn_run_once(n: int) -> float:
    return agent_api_run_once(n, _WholeTurnModel)


_KIT_ADDED = [0]


@define_tool
def kit_add(a: int, b: int) -> int:
    """Add two integers."""
    _KIT_ADDED[0] += 1
    return a + b


async def _kit_handler(n: int) -> Final:
    equip_instruction("add things")
    equip_tool(kit_add)
    return await prompt_agent(Final, max_turn_steps=n + 1)


_KIT_AGENT = create_agent(id="kit", handler=_kit_handler)


def kit_script(n: int) -> list[ModelTurnResult]:
    """The workload as a user's test writes it with the testing kit."""
    usage = TurnUsage(input_tokens=1, output_tokens=1)
    return [tool_call_turn([tool_call("kit_add", {"a": i, "b": 1}, id=f"call_{i}")], usage=usage)
            for i in range(1, n)] + [final_answer(_final_json(n), usage=usage)]


def agent_public_kit_run_once(n: int) -> float:
    """The agent as users and their tests run it: ``run_with`` over the public testing kit's
    ``scripted_stream_model`` (the script built before the clock starts, as a test does), one
    tool from a plain function through ``define_tool``."""
    _KIT_ADDED[0] = 0
    model = scripted_stream_model(kit_script(n))

    async def main() -> float:
        started = _clock()
        final = await run_with(_KIT_AGENT, initial_props=n, model=model)
        elapsed = _clock() - started
        _check(final, n, _KIT_ADDED[0])
        return elapsed

    return anyio.run(main)


def agent_snapshot_run_once(n: int) -> float:
    """The streamed agent with ``enable_snapshot=True``: every turn journaled with its prompt
    hash (what a trace or a replay also pays)."""
    return agent_api_run_once(n, enable_snapshot=True)


def bare_stream_run_once(n: int) -> float:
    """``run_tool_loop`` over the same streaming model, each turn folded by the engine's
    ``TurnCollector``: the floor for the agent's streamed path (the fold is the engine's work,
    which any ``run_tool_loop`` user of a streaming model does too)."""
    added = [0]

    def add(call: ToolCall) -> ToolOutcome:
        args = _ARGS.decode(call.arguments)
        added[0] += 1
        return ToolResult(content=str(args.a + args.b))

    state = ToolLoopState(messages=[UserMessage(content="add things")])
    # The model's complete is StreamModel's: the engine's fold of the stream (TurnCollector).
    params = ToolLoopParams(state=state, model=_StreamModel(n), max_iterations=n + 1,
                            runner=ToolRunner(run_tool_call=add, build_tools=lambda: [ADD]))

    async def main() -> float:
        started = _clock()
        result = await run_tool_loop(params)
        final = _FINAL.decode(state.messages[-1].content)  # type: ignore[arg-type]
        elapsed = _clock() - started
        assert result.stop_reason == "done"
        _check(final, n, added[0])
        return elapsed

    return anyio.run(main)


RUNNERS: dict[str, RunOnce] = {
    "bare loop": bare_loop_run_once,
    "bare (stream)": bare_stream_run_once,
    "agent API": agent_api_run_once,
    "agent (whole)": agent_whole_turn_run_once,
    "agent (snapshot)": agent_snapshot_run_once,
    "agent (public kit)": agent_public_kit_run_once,
    "pydantic-ai": pydantic_ai_run_once,
    "openai-agents": openai_agents_run_once,
}
PEERS = ("pydantic-ai", "openai-agents")


def measure(run: RunOnce, n: int, budget_s: float) -> float:
    """Median µs per turn over as many runs as fit in ``budget_s`` (at least 5)."""
    run(min(n, 10))  # warm-up: imports, caches
    first = run(n)
    repeats = max(5, min(200, int(budget_s / max(first, 1e-9))))
    return statistics.median(run(n) for _ in range(repeats)) / n * 1e6


def paired(a: RunOnce, b: RunOnce, n: int, budget_s: float) -> tuple[float, float, float]:
    """``a`` and ``b`` run alternately, one run of each per pair (as many pairs as fit in
    ``budget_s``, at least 9): the median µs per turn of each and the median of the pairs'
    ratios ``b / a``. Both runs of a pair see the same state of the machine (another process,
    the CPU's clock), which the table's medians, measured one runner after the other, do not."""
    a(min(n, 10))  # warm-up: imports, caches
    b(min(n, 10))
    first = a(n) + b(n)
    pairs = max(9, min(200, int(budget_s / max(first, 1e-9))))
    times_a: list[float] = []
    times_b: list[float] = []
    ratios: list[float] = []
    for _ in range(pairs):
        x, y = a(n), b(n)
        times_a.append(x)
        times_b.append(y)
        ratios.append(y / x)
    return (statistics.median(times_a) / n * 1e6, statistics.median(times_b) / n * 1e6,
            statistics.median(ratios))


def _in_subprocess(name: str, ns: list[int], budget_s: float) -> dict[int, float] | str:
    env = {**os.environ, "OPENAI_AGENTS_DISABLE_TRACING": "1", "OTEL_SDK_DISABLED": "true"}
    proc = subprocess.run(
        [sys.executable, os.path.abspath(__file__), "--only", name, "--json",
         "--ns", ",".join(map(str, ns)), "--budget", str(budget_s)],
        capture_output=True, text=True, env=env, timeout=900)
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["failed"])[-1]
        return f"unavailable ({tail[:80]})"
    return {int(k): v for k, v in json.loads(proc.stdout).items()}


SIDE_BY_SIDE = ("bare loop", "bare (stream)", "agent API", "agent (whole)", "agent (snapshot)")


def _measure_in(script: str, src: str, name: str, ns: list[int],
                budget_s: float) -> dict[int, float]:
    env = {**os.environ, "PYTHONPATH": src}
    proc = subprocess.run(
        [sys.executable, script, "--only", name, "--json", "--ns", ",".join(map(str, ns)),
         "--budget", str(budget_s)], capture_output=True, text=True, env=env, timeout=1800)
    if proc.returncode != 0:
        raise SystemExit(f"{script} --only {name!r} failed:\n{proc.stderr[-2000:]}")
    return {int(k): v for k, v in json.loads(proc.stdout).items()}


def _imported_from(src: str) -> str:
    proc = subprocess.run([sys.executable, "-c", "import bindloop.agent; "
                           "print(bindloop.agent.__file__)"], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": src}, check=True)
    return proc.stdout.strip()


def side_by_side(before_dir: str, ns: list[int], budget_s: float, rounds: int) -> int:
    """Before (the base's sources, with the base's own ``bench/agent.py`` when it has one: its
    runners speak the base's API) and after (this checkout and this file), each runner in a fresh
    interpreter, interleaved before/after for ``rounds`` rounds; the median over rounds is
    reported."""
    here = os.path.dirname(os.path.abspath(__file__))
    after_src = os.path.join(os.path.dirname(here), "src")
    before_src = os.path.join(os.path.abspath(before_dir), "src")
    before_script = os.path.join(os.path.abspath(before_dir), "bench", "agent.py")
    sides = (("before", before_src,
              before_script if os.path.exists(before_script) else os.path.abspath(__file__)),
             ("after", after_src, os.path.abspath(__file__)))
    for label, src, script in sides:
        print(f"{label}: bindloop.agent from {_imported_from(src)}, runners of {script}")
    samples: dict[tuple[str, str], list[dict[int, float]]] = {}
    for _ in range(rounds):
        for name in SIDE_BY_SIDE:
            for label, src, script in sides:
                samples.setdefault((label, name), []).append(
                    _measure_in(script, src, name, ns, budget_s))
    fig = {key: {n: statistics.median(r[n] for r in runs) for n in ns}
           for key, runs in samples.items()}
    print(f"µs per turn, median of {rounds} interleaved rounds (each the median of a run's "
          "repeats); ratio = after / before")
    print(f"{'runner':<16}" + "".join(f"{'N=' + str(n) + ' before':>14}{'after':>9}{'ratio':>7}"
                                      for n in ns))
    for name in SIDE_BY_SIDE:
        b, a = fig[("before", name)], fig[("after", name)]
        print(f"{name:<16}" + "".join(f"{b[n]:>14.1f}{a[n]:>9.1f}{a[n] / b[n]:>7.2f}" for n in ns))
    for label, agent, floor in (("added (stream)", "agent API", "bare loop"),
                                ("  over stream", "agent API", "bare (stream)"),
                                ("added (whole)", "agent (whole)", "bare loop")):
        cells = ""
        for n in ns:
            before = fig[("before", agent)][n] - fig[("before", floor)][n]
            after = fig[("after", agent)][n] - fig[("after", floor)][n]
            cells += f"{before:>14.1f}{after:>9.1f}{'':>7}"
        print(f"{label:<16}{cells}")
    for label, agent, floor in (("stream/bare(stream)", "agent API", "bare (stream)"),
                                ("stream/bare loop", "agent API", "bare loop"),
                                ("whole/bare loop", "agent (whole)", "bare loop")):
        cells = ""
        for n in ns:
            before = fig[("before", agent)][n] / fig[("before", floor)][n]
            after = fig[("after", agent)][n] / fig[("after", floor)][n]
            cells += f"{before:>13.2f}x{after:>8.2f}x{'':>7}"
        print(f"{label:<20}{cells[4:]}")
    print("added = agent µs/turn minus its floor's, in the same process family: 'added (stream)' "
          "and 'added (whole)' over the bare whole-turn loop, 'over stream' over the bare loop "
          "folding the same stream. Target: <= 10 µs/turn, flat in N. The x rows are the agent's "
          "ratio to its floor (targets: streamed agent <= 1.3x the bare loop folding the same "
          "stream and <= 2.0x the bare whole-turn loop).")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ns", default="10,100,1000")
    parser.add_argument("--peers", action="store_true")
    parser.add_argument("--peer-ns", default=None,
                        help="Ns for the peers (default: --ns); openai-agents' cost per turn grows "
                             "with the transcript, so N=1000 takes it minutes")
    parser.add_argument("--budget", type=float, default=2.0)
    parser.add_argument("--only", choices=sorted(RUNNERS))
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--before", metavar="DIR",
                        help="side by side with a checkout of the base commit in DIR (e.g. "
                             "`git archive <base> | tar -x -C DIR`): its sources and its own "
                             "bench/agent.py against this checkout's")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    ns = [int(x) for x in args.ns.split(",")]
    if args.before:
        return side_by_side(args.before, ns, args.budget, args.rounds)
    if args.only:
        figures = {n: measure(RUNNERS[args.only], n, args.budget) for n in ns}
        print(json.dumps(figures) if args.json else figures)
        return 0
    rows: dict[str, dict[int, float] | str] = {
        "bare loop": {n: measure(bare_loop_run_once, n, args.budget) for n in ns},
        "bare (stream)": {n: measure(bare_stream_run_once, n, args.budget) for n in ns},
        "agent API": {n: measure(agent_api_run_once, n, args.budget) for n in ns},
        "agent (whole)": {n: measure(agent_whole_turn_run_once, n, args.budget) for n in ns},
        "agent (public kit)": {n: measure(agent_public_kit_run_once, n, args.budget) for n in ns},
    }
    if args.peers:
        peer_ns = [int(x) for x in (args.peer_ns or args.ns).split(",")]
        for name in PEERS:
            rows[name] = _in_subprocess(name, peer_ns, args.budget)
    bare = rows["bare loop"]
    assert isinstance(bare, dict)
    header = f"{'runner':<16}" + "".join(f"{'N=' + str(n):>22}" for n in ns)
    print("µs per turn (median), ratio to bindloop's bare run_tool_loop in the same run")
    print(header)
    for name, figures in rows.items():
        if isinstance(figures, str):
            print(f"{name:<16}{figures}")
            continue
        cells = "".join(f"{figures[n]:>13.1f} ({figures[n] / bare[n]:>5.2f}x)" if n in figures
                        else f"{'-':>22}" for n in ns)
        print(f"{name:<16}{cells}")
    for label, key, floor_key in (("added (stream)", "agent API", "bare loop"),
                                  ("  over stream", "agent API", "bare (stream)"),
                                  ("added (whole)", "agent (whole)", "bare loop")):
        agent, floor = rows[key], rows[floor_key]
        assert isinstance(agent, dict) and isinstance(floor, dict)
        added = "".join(f"{agent[n] - floor[n]:>22.1f}" for n in ns)
        print(f"{label:<16}{added}   (target <= 10 µs/turn, flat in N)")
    kit, bench_model = rows["agent (public kit)"], rows["agent API"]
    assert isinstance(kit, dict) and isinstance(bench_model, dict)
    print("public kit: " + "; ".join(
        f"N={n}: {kit[n]:.1f} vs bare {bare[n]:.1f} µs/turn = {kit[n] / bare[n]:.2f}x "
        f"(this file's stream model: {bench_model[n] / bare[n]:.2f}x)" for n in ns)
        + "   (target <= 1.7x at N=300)")
    # The target's own reading: the kit and the bare loop run alternately, pair by pair.
    for n in [n for n in ns if n == 300] or ns[-1:]:
        bare_n, kit_n, ratio = paired(bare_loop_run_once, agent_public_kit_run_once, n,
                                      2 * args.budget)
        print(f"public kit, run alternately with the bare loop: N={n}: {kit_n:.1f} vs "
              f"{bare_n:.1f} µs/turn, median of the pairs' ratios {ratio:.2f}x   "
              "(target <= 1.7x at N=300)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
