"""Agent-API scenarios (``"kind": "agent"``): a named program from :data:`PROGRAMS` run through
``bindloop.agent`` over a scripted stream model, observed as plain JSON (the answer, what each model
call was sent, the agent stream events, the snapshot bytes) so CPython and Pyodide reports can be
compared byte for byte. No timings are reported: they are the only runtime-dependent figures."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import msgspec

from bindloop import ModelTurnResult, ToolCall, ToolResult, TurnUsage
from bindloop.contracts import messages_to_openai
from bindloop.agent import (
    ChatResult,
    resume_chat,
    create_agent,
    equip_instruction,
    equip_memory,
    equip_resource,
    equip_scope,
    equip_system,
    equip_tool,
    expect_resource,
    expect_scope,
    expect_validator,
    on_stream,
    prompt_agent,
    prompt_chat,
    reborn,
    run_with,
)
from bindloop.agent.approvals import (
    ApprovalError,
    approve,
    deny,
)
from bindloop.agent.events import (
    AgentStreamEvent,
    StructuredDataEvent,
)
from bindloop.agent.snapshots import (
    dump_snapshot,
    encode_snapshot,
)
from bindloop.errors import UsageError
from bindloop.tools import define_tool
from bindloop.checkpoints import parse_loop_checkpoint, serialize_loop_checkpoint
from bindloop.testing import ScriptedStreamModel

__all__ = ("PROGRAMS", "run_agent_scenario")


class TurnSpec(msgspec.Struct, forbid_unknown_fields=True):
    text: str | None = None
    tool_calls: list[dict[str, Any]] = []
    usage: dict[str, int] = {}


class AgentScenario(msgspec.Struct, forbid_unknown_fields=True):
    kind: str
    description: str
    program: str
    model: list[TurnSpec]
    input: dict[str, Any] = {}
    expect: dict[str, Any] = {}
    replay: bool = False


def _turn(spec: TurnSpec) -> ModelTurnResult:
    calls = tuple(ToolCall(id=c["id"], name=c["name"],
                           arguments=msgspec.json.encode(c.get("arguments", {})).decode())
                  for c in spec.tool_calls)
    return ModelTurnResult(text=spec.text, tool_calls=calls, usage=msgspec.convert(spec.usage, TurnUsage),
                           finish_reason="tool_calls" if calls else "stop")


class Forecast(msgspec.Struct):
    city: str
    high_c: int
    summary: str
    warning: str | None = None


class CityArgs(msgspec.Struct):
    city: str


def _weather_tool() -> Any:
    table = {"Lisbon": "sunny, 24C", "Oslo": "snow, -3C"}

    async def lookup(args: CityArgs, ctx: object) -> ToolResult:
        return ToolResult(content=table.get(args.city, "unknown city"))

    return define_tool(name="weather", description="Current weather for a city", args=CityArgs,
                       execute=lookup)


class Observed:
    def __init__(self) -> None:
        self.events: list[AgentStreamEvent] = []

    async def consume(self, stream: Any) -> None:
        async for event in stream:
            self.events.append(event)

    def stream_summary(self) -> list[str]:
        out = []
        for e in self.events:
            event = e.event
            tag = str(event.__struct_config__.tag)
            if isinstance(event, StructuredDataEvent):
                tag += f":{event.status}" + (":valid" if event.is_valid else "")
            out.append(f"{e.turn_index}:{tag}")
        return out

    def structured_finals(self) -> list[str]:
        return [f"{e.turn_index}:{e.event.status}" for e in self.events
                if isinstance(e.event, StructuredDataEvent) and e.event.status != "partial"]


async def structured_reask(inp: dict[str, Any], seen: Observed) -> Any:
    """A forecast agent: a tool, a validator, stream events; the script gets it wrong twice."""
    tool = _weather_tool()

    async def handler(props: dict[str, Any]) -> Forecast:
        equip_system("You are a weather service. Answer as JSON.")
        equip_instruction(f"Forecast for {props['city']}.")
        equip_tool(tool)
        expect_validator(lambda f: True if -60 <= f.high_c <= 60 else
                         f"high_c {f.high_c} is not a plausible temperature in Celsius")
        on_stream(seen.consume)
        return await prompt_agent(Forecast)

    agent = create_agent(id="forecaster", handler=handler, max_retries=2)
    return msgspec.to_builtins(await agent(inp))


async def reborn_memory(inp: dict[str, Any], seen: Observed) -> Any:
    """Three generations, one prompt each, the answers kept in memory across reborns."""
    async def handler(props: dict[str, Any]) -> Any:
        stored: list[str] = []
        answers, set_answers = equip_memory("answers", stored)
        equip_instruction(f"Step {len(answers) + 1} of {props['steps']}.")
        chat = await prompt_chat()
        answers = [*answers, chat.data]
        set_answers(answers)
        if len(answers) < props["steps"]:
            return reborn()
        return {"answers": answers, "snapshot_memory": dump_snapshot().root.children[0].memory}

    return await create_agent(id="stepper", handler=handler)(inp)


async def sub_agent_scope(inp: dict[str, Any], seen: Observed) -> Any:
    """A lead agent offers scope and a resource; its researcher reads them and calls a tool."""
    tool = _weather_tool()

    async def researcher(city: str) -> str:
        tenant = expect_scope("tenant")
        units = expect_resource("units")
        region = expect_resource("region")
        equip_instruction(f"[{tenant}/{region}] weather in {city}, in {units}")
        equip_tool(tool)
        return (await prompt_chat()).data

    research = create_agent(id="researcher", handler=researcher)

    async def lead(props: dict[str, Any]) -> Any:
        equip_scope("tenant", props["tenant"])
        equip_resource("region", lambda: "eu-west", [props["tenant"]])
        notes = [await research(city) for city in props["cities"]]
        equip_instruction("Summarise: " + " | ".join(notes))
        summary = (await prompt_chat()).data
        tree = dump_snapshot().root.children[0]
        return {"notes": notes, "summary": summary,
                "children": [c.agent_id for c in tree.children]}

    return await create_agent(id="lead", handler=lead)(inp)


class Payment(msgspec.Struct):
    to: str
    amount: int


class RevisionConflict(UsageError):
    """The fence of :class:`FencedSaves`: a usage error naming ``revision`` and ``stored``, the
    shape every checkpoint store's conflict error has."""

    def __init__(self, revision: int, stored: int) -> None:
        super().__init__(f"revision {revision} does not follow the stored revision {stored}")
        self.revision = revision
        self.stored = stored


class FencedSaves:
    """An in-memory checkpoint store fenced on the revision (what SqliteStore does on disk)."""

    def __init__(self) -> None:
        self.stored: dict[str, tuple[int, bytes]] = {}
        self.log: list[list[Any]] = []

    def save(self, cp: Any) -> None:
        held = self.stored.get(cp.execution_id)
        if held is not None and held[0] + 1 != cp.revision:
            raise RevisionConflict(cp.revision, held[0])
        self.stored[cp.execution_id] = (cp.revision, serialize_loop_checkpoint(cp))
        self.log.append([cp.revision, cp.status])


async def approval_once(inp: dict[str, Any], seen: Observed) -> Any:
    """A payments agent: ``pay`` needs approval, ``balance`` does not. The chat suspends with two
    signed pending payments; a forged decision is refused; one payment is approved (it runs once,
    inside the resumed run) and one denied (the model reads the reason); the same decision posted
    again is refused by name, and nothing runs twice."""
    secret = inp["secret"]
    store = FencedSaves()
    effects: list[str] = []

    async def pay(args: Payment, ctx: object) -> ToolResult:
        effects.append(f"{args.to}:{args.amount}")
        return ToolResult(content=f"paid {args.amount} to {args.to}")

    async def balance(args: Payment, ctx: object) -> ToolResult:
        return ToolResult(content="balance 100")

    pay_tool = define_tool(name="pay", description="Pay someone", args=Payment, execute=pay)
    balance_tool = define_tool(name="balance", description="Balance", args=Payment,
                               execute=balance)

    def equip() -> None:
        equip_tool(pay_tool, needs_approval=lambda a: a["amount"] > inp["free_below"])
        equip_tool(balance_tool)

    async def start(props: dict[str, Any]) -> ChatResult:
        equip_instruction(props["ask"])
        equip()
        return await prompt_chat(on_checkpoint=store.save, approval_secret=secret)

    paused = await create_agent(id="payer", handler=start)(inp)
    assert paused.checkpoint is not None
    ident = paused.checkpoint.execution_id
    stored = store.stored[ident][1]
    pending = {p.call_id: p for p in paused.approvals}

    def decider(decisions: list[Any]) -> Any:
        async def decide(_: None) -> ChatResult:
            equip()
            return await resume_chat(stored, decisions=decisions, on_checkpoint=store.save,
                                     approval_secret=secret)

        return create_agent(id="payer", handler=decide)

    async def refused(decisions: list[Any]) -> list[Any]:
        try:
            await decider(decisions)(None)
        except ApprovalError as exc:
            return [type(exc).__name__, list(getattr(exc, "call_ids", ()))]
        return ["not refused"]

    forged = await refused([approve(inp["approve"], token="0" * 64)])
    chosen = [approve(pending[inp["approve"]]),
              deny(pending[inp["deny"]], inp["reason"])]
    done = await decider(chosen)(None)
    again = await refused([approve(pending[inp["deny"]])])
    final = parse_loop_checkpoint(store.stored[ident][1])
    return {"paused": paused.stop_reason,
            "pending": [[p.call_id, p.tool, p.arguments, len(p.token or "")]
                        for p in paused.approvals],
            "tokens": [p.token for p in paused.approvals],
            "forged": forged, "done": [done.stop_reason, done.data], "again": again,
            "effects": effects, "saves": store.log, "final": final.status,
            "resumed_checkpoint": None if done.checkpoint is None else done.checkpoint.revision}


PROGRAMS: dict[str, Callable[[dict[str, Any], Observed], Awaitable[Any]]] = {
    "structured_reask": structured_reask,
    "reborn_memory": reborn_memory,
    "sub_agent_scope": sub_agent_scope,
    "approval_once": approval_once,
}


def _requests(model: ScriptedStreamModel) -> list[Any]:
    return [{"messages": messages_to_openai(list(r.messages)),
             "tools": [t.name for t in r.request.tools],
             "schema": r.request.schema is not None} for r in model.requests]


async def _run(sc: AgentScenario, snapshot: Any = None) -> dict[str, Any]:
    model = ScriptedStreamModel([_turn(t) for t in sc.model])
    seen = Observed()
    program = PROGRAMS[sc.program]

    async def root() -> Any:
        result = await program(sc.input, seen)
        return result, dump_snapshot()

    outcome: dict[str, Any]
    snap_bytes = b""
    try:
        result, snap = await run_with(root, model=model, providers={"units": "celsius"},
                                      enable_snapshot=True, snapshot=snapshot)
        snap_bytes = encode_snapshot(snap)
        outcome = {"result": result}
    except Exception as exc:
        outcome = {"error": type(exc).__name__, "message": str(exc)}
    return {"outcome": outcome, "requests": _requests(model), "model_calls": model.position,
            "stream": seen.stream_summary(), "structured_finals": seen.structured_finals(),
            "snapshot": snap_bytes.decode(), "snapshot_bytes": len(snap_bytes)}


async def run_agent_scenario(name: str, data: bytes,
                             diff: Callable[[str, Any, Any, list[dict[str, Any]]], None],
                             ) -> dict[str, Any]:
    """One agent scenario's report entry (``diff`` is the runner's leaf-by-leaf comparison)."""
    entry: dict[str, Any] = {"name": name}
    try:
        sc = msgspec.json.decode(data, type=AgentScenario)
        if sc.program not in PROGRAMS:
            raise ValueError(f"unknown program {sc.program!r} (known: {sorted(PROGRAMS)})")
    except (msgspec.ValidationError, msgspec.DecodeError, ValueError) as exc:
        entry.update(passed=False, outcome={"scenario_error": f"{type(exc).__name__}: {exc}"},
                     mismatches=[])
        return entry
    observed = await _run(sc)
    if sc.replay:
        from bindloop.agent.snapshots import parse_snapshot

        again = await _run(AgentScenario(kind=sc.kind, description=sc.description,
                                         program=sc.program, model=[], input=sc.input),
                           snapshot=parse_snapshot(observed["snapshot"]))
        observed["replay"] = {"outcome": again["outcome"], "model_calls": again["model_calls"],
                              "same_snapshot": again["snapshot"] == observed["snapshot"]}
    mismatches: list[dict[str, Any]] = []
    for key, wanted in sc.expect.items():
        diff(key, wanted, observed.get(key, "<not observed>"), mismatches)
    entry.update(observed)
    entry.update(description=sc.description, passed=not mismatches, mismatches=mismatches)
    return entry
