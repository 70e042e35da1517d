"""What snapshots, traces and replays add to an agent turn: the prompt hash of each model call.

The agent (``create_agent`` + ``equip_tool`` + ``prompt_agent(Final)``) over a scripted model that
streams one ``add`` tool call per turn and then answers, run with ``run_with(enable_snapshot=True)``
(every model call hashed and journaled; a trace or a replay hashes the same way) and without, the
two interleaved repeat by repeat in one process, the young generations collected (untimed) before
each run. CPU µs per turn, median over repeats. A call's
hash is computed when something reads it (a replay's check, a trace, a stream consumer's done
event, a snapshot taken): journaled alone, a run that takes no snapshot never computes it, so
``in a prompt`` also runs a third way, ``snapshot + dump``, whose agent takes ``dump_snapshot()``
after its prompt (every call's hash computed, as an eager hash did it).

* ``in a prompt``: one prompt of N turns, its transcript growing to ~2N messages (10 to 5,000):
  each call hashes only the messages added since the previous one.
* ``prompt start``: a run whose root calls the agent twice over a stored history of H messages
  (``equip_history``), 4 turns each. The first prompt meets H messages the run has never hashed
  (each is encoded once); the second, over the same history plus the first's exchange, resumes
  from the hashed prefix and encodes only its new messages.

    python bench/hashing.py [--ns 5,50,500,2500] [--hs 10,100,1000,5000] [--budget 1.0] [--json]

``python bench/report.py --only hashing`` runs it in fresh interpreters and writes the figures into
docs/performance.md.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import anyio
import msgspec

from bindloop import ToolResult, TurnUsage
from bindloop.agent import (
    create_agent,
    equip_history,
    equip_instruction,
    equip_system,
    equip_tool,
    prompt_agent,
    run_with,
)
from bindloop.agent.snapshots import dump_snapshot
from bindloop.completion import FinishEvent, StreamEvent, TextEvent, ToolCallChunk, \
    ToolCallEvent, UsageEvent
from bindloop.contracts import AssistantMessage, Message, UserMessage
from bindloop.model import ModelRequest, StreamModel
from bindloop.tools import define_tool

_clock = time.process_time  # CPU of this process: other engineers' load does not count


class Final(msgspec.Struct):
    total: int
    note: str


class AddArgs(msgspec.Struct):
    a: int
    b: int


async def _add(args: AddArgs, ctx: object) -> ToolResult:
    return ToolResult(content=str(args.a + args.b))


ADD = define_tool(name="add", description="Add two integers.", args=AddArgs, execute=_add)


class ScriptedModel(StreamModel):
    """Streams ``add`` calls on turns 1..n-1 of each prompt and the answer on turn n."""

    structured_output = "json_schema"

    def __init__(self, n: int) -> None:
        self.id, self.provider = "bench", "bench"
        self.n = n
        self.turn = 0

    async def stream(self, messages: Sequence[Message],
                     request: ModelRequest, /) -> AsyncIterator[StreamEvent]:
        self.turn += 1
        i = self.turn
        if i % self.n:
            yield ToolCallEvent(tool_call=ToolCallChunk(index=0, id=f"call_{i}", name="add",
                                                        arguments=f'{{"a":{i},"b":1}}'))
            yield UsageEvent(usage=TurnUsage(input_tokens=1, output_tokens=1))
            yield FinishEvent(finish_reason="tool_calls")
        else:
            yield TextEvent(content=f'{{"total": {i}, "note": "done"}}')
            yield UsageEvent(usage=TurnUsage(input_tokens=1, output_tokens=1))
            yield FinishEvent(finish_reason="stop")


async def _in_prompt(props: tuple[int, bool]) -> Final:
    n, dump = props
    equip_instruction("add things")
    equip_tool(ADD)
    final = await prompt_agent(Final, max_turn_steps=n + 1)
    if dump:  # every call's hash computed, as a snapshot taken reads them
        dump_snapshot()
    return final


IN_PROMPT = create_agent(id="in_prompt", handler=_in_prompt)

TURNS = 4


async def _chat(history: list[Message]) -> Final:
    equip_system("You add numbers for the user, one tool call at a time.")
    equip_history(history)
    equip_instruction("add things")
    equip_tool(ADD)
    return await prompt_agent(Final, max_turn_steps=TURNS + 1)


CHAT = create_agent(id="chat", handler=_chat)


def history(h: int) -> list[Message]:
    out: list[Message] = []
    for i in range(h // 2):
        out.append(UserMessage(content=f"Question {i}: what is {i} plus one, and why?"))
        out.append(AssistantMessage(content=f"Answer {i}: {i} plus one is {i + 1}; adding one "
                                            "moves to the next integer."))
    return out


def in_prompt_once(n: int, snapshot: bool | str) -> float:
    """CPU per turn of one prompt of ``n`` turns: plain (``False``), journaled (``True``), or
    journaled with a snapshot taken after the prompt (``"dump"``)."""
    async def main() -> float:
        started = _clock()
        await run_with(IN_PROMPT, initial_props=(n, snapshot == "dump"), model=ScriptedModel(n),
                       enable_snapshot=bool(snapshot))
        return (_clock() - started) / n

    return anyio.run(main)


def prompt_start_once(h: int, snapshot: bool) -> tuple[float, float]:
    """CPU per turn of the run's first prompt over ``h`` stored messages and of its second (the
    history grown by the first prompt's instruction and answer)."""
    stored = history(h)
    spent: list[float] = []

    async def root() -> None:
        started = _clock()
        await CHAT(stored)
        spent.append(_clock() - started)
        stored.extend([UserMessage(content="add things"),
                       AssistantMessage(content='{"total": 4, "note": "done"}')])
        started = _clock()
        await CHAT(stored)
        spent.append(_clock() - started)

    anyio.run(lambda: run_with(root, model=ScriptedModel(TURNS), enable_snapshot=snapshot))
    return spent[0] / TURNS, spent[1] / TURNS


def _interleaved(run: Callable[[Any], Any], budget_s: float,
                 modes: tuple[Any, ...] = (False, True)) -> dict[Any, list[Any]]:
    for mode in modes:  # warm-up: imports, first-use work
        run(mode)
    started = time.perf_counter()
    out: dict[Any, list[Any]] = {mode: [] for mode in modes}
    while len(out[True]) < 5 or (time.perf_counter() - started < budget_s
                                 and len(out[True]) < 200):
        for mode in modes:
            # The previous run's garbage collected untimed: otherwise the collector's periodic
            # passes over it land on whichever mode their period happens to align with.
            gc.collect(1)
            out[mode].append(run(mode))
    return out


def measure(ns: list[int], hs: list[int], budget_s: float) -> dict[str, dict[int, list[float]]]:
    """``in_prompt``: N -> [plain, snapshot, snapshot + dump]; ``prompt_start``: H -> [plain,
    snapshot] of the first prompt then of the second. CPU µs per turn, medians of interleaved
    repeats."""
    out: dict[str, dict[int, list[float]]] = {"in_prompt": {}, "prompt_start": {}}
    modes = (False, True, "dump")
    for n in ns:
        runs = _interleaved(lambda s, n=n: in_prompt_once(n, s), budget_s, modes)
        out["in_prompt"][n] = [statistics.median(runs[s]) * 1e6 for s in modes]
    for h in hs:
        runs = _interleaved(lambda s, h=h: prompt_start_once(h, s), budget_s)
        out["prompt_start"][h] = [statistics.median(r[k] for r in runs[s]) * 1e6
                                  for k in (0, 1) for s in (False, True)]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ns", default="5,50,500,2500")
    parser.add_argument("--hs", default="10,100,1000,5000")
    parser.add_argument("--budget", type=float, default=1.0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    fig = measure([int(x) for x in args.ns.split(",")], [int(x) for x in args.hs.split(",")],
                  args.budget)
    if args.json:
        print(json.dumps(fig))
        return 0
    print("CPU µs per turn, median; snapshot / plain measured interleaved in this process")
    print(f"{'in a prompt':<24}{'plain':>10}{'snapshot':>10}{'ratio':>8}{'+ dump':>10}"
          f"{'ratio':>8}")
    for n, (plain, snap, dumped) in fig["in_prompt"].items():
        print(f"{f'N={n} turns (~{2 * n} msgs)':<24}{plain:>10.1f}{snap:>10.1f}"
              f"{snap / plain:>7.2f}x{dumped:>10.1f}{dumped / plain:>7.2f}x")
    print(f"{'prompt start':<24}{'plain':>10}{'snapshot':>10}{'ratio':>8}"
          f"{'plain':>10}{'snapshot':>10}{'ratio':>8}")
    print(f"{'':<24}{'first prompt of the run':>28}{'second prompt':>28}")
    for h, (p1, s1, p2, s2) in fig["prompt_start"].items():
        print(f"{f'H={h} stored msgs':<24}{p1:>10.1f}{s1:>10.1f}{s1 / p1:>7.2f}x"
              f"{p2:>10.1f}{s2:>10.1f}{s2 / p2:>7.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
