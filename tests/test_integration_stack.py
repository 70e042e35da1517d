"""One agent through the whole stack, over real loopback HTTP.

The agent is built by executing the code blocks of ``docs/howto-full-stack.md`` (so the how-to is
the wiring under test) from public names only. The provider is the only thing scripted: a
stateless policy (``integration_provider``) served by ``harness.fixtures.scripted_server`` on the
Anthropic wire (primary: 503 on the first turn, a stream cut after some text on the last) and the
OpenAI Chat wire (backup, SSE; and the compaction summarizer, plain JSON).

Checked: typed tools with a nested Struct and an optional field; a plugin activated mid-batch by a
serial activation tool and its tools offered on the next request; a platform skill whose body
reaches the next request's system prompt; fallback with a retractable text surface (a reset only
after an attempt that had shown text, never glued text); one compaction folded as spend, not a
turn; a ``waiting_for_reply`` suspend answered with ``apply_checkpoint_input``; and an execution
stopped at a random settled boundary, stored, parsed and resumed ending byte-identical to one
that never stopped, with a healed-clean transcript and equal cumulative stats.
"""

from __future__ import annotations

import random
import re
import sys
import textwrap
import types
from collections import defaultdict
from pathlib import Path
from typing import Any

import anyio
import httpx
import msgspec
import pytest

import bindloop as bl
import bindloop.compaction
import bindloop.textstream
import bindloop.contracts
import bindloop.loop
import bindloop.routing
import bindloop.checkpoints
import bindloop.transcript
import integration_provider as provider
from harness.fixtures.scripted_server import ScriptedProviderServer
from bindloop.testing import recording_sink

DOC = Path(__file__).resolve().parents[1] / "docs" / "howto-full-stack.md"
CONTEXT_WINDOW = bl.compaction.OUTPUT_RESERVE_TOKENS + 1_000   # effective window 1,000: 80% is 800 tokens
REPLY = "Aisle, please."


def _howto() -> dict[str, Any]:
    """The how-to's blocks, executed in order as one module (registered, because dataclasses and
    msgspec resolve postponed annotations through ``sys.modules``)."""
    blocks = [textwrap.dedent(b) for b in re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)]
    assert len(blocks) == 5, "the how-to's five wiring blocks"
    module = types.ModuleType("howto_full_stack")
    sys.modules[module.__name__] = module
    for block in blocks:
        exec(compile(block, str(DOC), "exec"), module.__dict__)
    return module.__dict__


HOWTO = _howto()


class Execution(msgspec.Struct, kw_only=True):
    final: bl.LoopCheckpoint
    storage: list[bytes]
    requests: list[Any]
    sink_events: list[Any]
    routes: list[bl.routing.RouteResult[bl.ModelTurnResult]]
    assistant: list[bl.AssistantMessage]
    commits: list[bl.LoopCheckpoint]
    bookings: list[str]
    legs: list[bl.checkpoints.CheckpointRunResult]


def _execute(stop_at: int | None = None) -> Execution:
    """One execution of the agent from its first checkpoint to ``finished``. ``stop_at``: the
    index (over the whole execution) of the non-final commit to stop at, as a crash-free shutdown
    would; the rest then runs from the stored bytes in what stands for another process."""
    ns = HOWTO
    storage: list[bytes] = []
    commits: list[bl.LoopCheckpoint] = []
    sink = recording_sink(retractable=True)
    routes: list[bl.routing.RouteResult[bl.ModelTurnResult]] = []
    assistant: list[bl.AssistantMessage] = []
    boundary = [0]

    def stop(cp: bl.LoopCheckpoint) -> bool:
        commits.append(cp)
        if cp.status != "ready":
            return False  # a final commit: the run has ended anyway
        hit = boundary[0] == stop_at
        boundary[0] += 1
        return hit

    def reply(suspend: bl.loop.OpenSuspend) -> str:
        assert (suspend.tool_name, suspend.mode) == ("ask_user", "waiting_for_reply")
        assert suspend.detail == "Window or aisle on the way back?"
        return REPLY

    with ScriptedProviderServer() as server:
        for prefix, responder in provider.RESPONDERS.items():
            server.set_responder(prefix, responder)

        async def main() -> bl.LoopCheckpoint:
            async with httpx.AsyncClient(timeout=httpx.Timeout(10.0)) as client:
                host = ns["Host"](
                    urls={p: server.base_url(p) for p in provider.RESPONDERS}, client=client,
                    world=ns["World"](), sink=sink, context_window=CONTEXT_WINDOW,
                    on_route=routes.append, on_assistant=assistant.append)
                final, runs = await ns["drive"](
                    host, ns["start"]("Book Ada a return trip to Lisbon."),
                    storage=storage, reply=reply, stop=stop)
                bookings.extend(host.world.bookings)
                legs.extend(runs)
                assert isinstance(final, bl.LoopCheckpoint)
                return final

        legs: list[bl.checkpoints.CheckpointRunResult] = []
        bookings: list[str] = []
        final = anyio.run(main)
        requests = list(server.requests)
    return Execution(final=final, storage=storage, requests=requests, sink_events=sink.events,
                     routes=routes, assistant=assistant, commits=commits, bookings=bookings,
                     legs=legs)


@pytest.fixture(scope="module")
def reference() -> Execution:
    return _execute()


def _model_requests(run: Execution) -> list[tuple[str, str, list[str], str]]:
    """(prefix, system, tools, key) of every model request (not the summarizer), in order."""
    out = []
    for request in run.requests:
        prefix, system, tools, _ = provider.decoded(request)
        if prefix != "summarizer":
            out.append((prefix, system, tools, provider.key_of(request)))
    return out


# -- the uninterrupted execution ---------------------------------------------------------------


def test_execution_finishes_with_every_turn_and_the_reply(reference: Execution) -> None:
    final = reference.final
    assert final.status == "finished"
    assert final.iterations == final.stats.turns == len(provider.MODEL_TURN_KEYS)
    assert reference.bookings == ["AMS->LIS for Ada (window if possible)", "LIS->AMS for Ada"]
    last = final.messages[-1]
    assert isinstance(last, bl.AssistantMessage)
    assert bl.contracts.content_text(last.content) == provider.TURNS["c6"].text
    answers = {m.tool_call_id: m for m in final.messages if isinstance(m, bl.ToolMessage)}
    assert answers["c4"].content == REPLY                  # the person's reply, as c4's result
    assert answers["c6"].content == "AMS->LIS for Ada (window if possible); LIS->AMS for Ada"
    # Two runs: one up to the question, one after the reply; their spend adds up exactly.
    assert [leg.stop_reason for leg in reference.legs] == ["waiting_for_reply", "done"]
    assert [cp.status for cp in reference.commits if cp.status != "ready"] == [
        "waiting_for_reply", "finished"]
    assert _summed(reference.legs) == final.stats == reference.legs[-1].cumulative_stats
    assert reference.storage[-1] == bl.serialize_loop_checkpoint(final)


def test_plugin_activated_mid_batch_and_offered_next_turn(reference: Execution) -> None:
    requests = _model_requests(reference)
    first = [tools for _, _, tools, key in requests if key == provider.START]
    assert first and all(tools == ["activate_plugin", "load_skill", "ask_user"] for tools in first)
    later = [tools for _, _, tools, key in requests if key != provider.START]
    assert later and all({"book_trip", "itinerary"} <= set(tools) for tools in later)
    # c2 ran in the batch that activated its plugin, because c1 ran first and alone.
    assert reference.bookings[0].startswith("AMS->LIS")


def test_skill_body_reaches_the_next_system_prompt(reference: Execution) -> None:
    policy = HOWTO["TRAVEL_POLICY"]
    for _, system, _, key in _model_requests(reference):
        assert "platform:travel-policy" in system            # the catalog line, always
        assert (policy in system) == (key != provider.START)  # the body, once loaded
    bindings = reference.final.bindings.config
    assert bindings["skills"] == ["platform:travel-policy"]
    assert bindings["plugins"] == ["core", "travel"]
    assert len(bindings["skill_shas"]["platform:travel-policy"]) == 64


def test_fallback_routes_and_surface_has_no_glued_text(reference: Execution) -> None:
    by_turn: dict[str, list[Any]] = defaultdict(list)
    for event in reference.sink_events:
        by_turn[event.turn_id].append(event)
    # One stream per model turn, ids continuing across resumes; a tool-only turn emits nothing.
    turn_ids = [f"trip-1/{n}" for n in range(1, 6)]
    assert set(by_turn) == set(turn_ids) - {"trip-1/2"}
    assert len(reference.routes) == len(reference.assistant) == 5

    attempts = [[(a.provider_id, a.outcome, a.category) for a in r.attempts]
                for r in reference.routes]
    assert attempts[0] == [("primary", "failed", "server_error"), ("backup", "succeeded", None)]
    assert attempts[4] == [("primary", "failed", "connection"), ("backup", "succeeded", None)]
    assert all(a == [("primary", "succeeded", None)] for a in attempts[1:4])

    for turn_id, route, message in zip(turn_ids, reference.routes, reference.assistant):
        events = by_turn[turn_id]
        resets = [e for e in events if e.kind == "reset"]
        failed = [a for a in route.attempts if a.outcome == "failed"]
        shown_before_failing = bool(failed) and any(
            e.kind == "text" and e.epoch == 0 for e in events)  # epoch 0: the first attempt
        # A reset after the failed attempt only if that attempt had streamed text.
        assert len(resets) == (1 if shown_before_failing else 0)
        reducer = bl.textstream.TurnStreamReducer()
        for event in events:
            assert reducer.apply(event) == "applied"
        shown = reducer.text(turn_id) or ""   # None: the turn never emitted (tool calls only)
        assert shown == bl.contracts.content_text(message.content)   # exactly the answer, no glue
    assert not [e for e in by_turn[turn_ids[0]] if e.kind == "reset"]   # the 503 showed nothing
    assert [e.kind for e in by_turn[turn_ids[4]]].count("reset") == 1   # the cut stream had


def test_one_compaction_is_spend_not_a_turn(reference: Execution) -> None:
    summaries = [r for r in reference.requests if r.path.startswith("/summarizer/")]
    assert len(summaries) == 1
    final = reference.final
    summary_messages = [m for m in final.messages if isinstance(m, bl.UserMessage)
                        and isinstance(m.content, str) and m.content.startswith(bl.compaction.SUMMARY_PREFIX)]
    assert len(summary_messages) == 1
    assert (provider.SUMMARY.text or "?") in bl.contracts.content_text(summary_messages[0].content)
    assert not any(isinstance(m, bl.ToolMessage) and m.tool_call_id == "c1" for m in final.messages)

    turns = [provider.TURNS[k].usage for k in provider.MODEL_TURN_KEYS]
    spent = [*turns, provider.SUMMARY.usage]
    price = HOWTO["price"]
    stats = final.stats
    assert stats.turns == len(turns)
    assert stats.input_tokens == sum(u.input_tokens for u in spent)
    assert stats.output_tokens == sum(u.output_tokens for u in spent)
    assert stats.cost == sum(price(u) for u in spent)


def _assert_heals_clean(final: bl.LoopCheckpoint) -> None:
    """A finished transcript ends on the model's answer, which ``validate_and_heal_messages``
    reports as ``trailing_assistant`` (it heals *requests*, which must end on the user side).
    That is the only issue; with the next user message applied there is none at all."""
    messages = list(final.messages)
    healed, issues = bl.transcript.validate_and_heal_messages(messages)
    assert [(i.kind, i.index) for i in issues] == [("trailing_assistant", len(messages))]
    assert healed[:-1] == messages and isinstance(healed[-1], bl.UserMessage)
    follow_up = bl.checkpoints.apply_checkpoint_input(final, bl.UserMessage(content="Thanks!"))
    again = list(follow_up.messages)
    healed, issues = bl.transcript.validate_and_heal_messages(again)
    assert not issues and healed is again or healed == again


def test_final_transcript_needs_no_healing(reference: Execution) -> None:
    _assert_heals_clean(reference.final)


def test_finished_transcript_literally_heals_with_no_issues(reference: Execution) -> None:
    # A stored history (not a request about to be sent) may end on the model's answer.
    _, issues = bl.transcript.validate_and_heal_messages(list(reference.final.messages), for_request=False)
    assert not issues


def _summed(legs: list[bl.checkpoints.CheckpointRunResult]) -> bl.RunStats:
    total = bl.contracts.empty_run_stats()
    for leg in legs:
        total = bl.contracts.accumulate_run(total, leg.stats)
    return total


# -- stop anywhere, resume elsewhere -----------------------------------------------------------


def _boundaries(run: Execution) -> int:
    return sum(1 for cp in run.commits if cp.status == "ready")


def _assert_same_execution(resumed: Execution, reference: Execution) -> None:
    assert resumed.final.status == "finished"
    reasons = [leg.stop_reason for leg in resumed.legs]
    assert reasons.count("checkpointed") == 1 and len(reasons) == 3
    assert [r for r in reasons if r != "checkpointed"] == ["waiting_for_reply", "done"]
    assert _summed(resumed.legs) == reference.final.stats       # cumulative stats match
    assert resumed.legs[-1].cumulative_stats == reference.legs[-1].cumulative_stats
    # The resumed process did not compact (or pay for it) a second time.
    assert sum(r.path.startswith("/summarizer/") for r in resumed.requests) == 1
    assert resumed.final.messages == reference.final.messages
    assert resumed.final.stats == reference.final.stats
    assert resumed.final == reference.final
    assert bl.serialize_loop_checkpoint(resumed.final) == bl.serialize_loop_checkpoint(
        reference.final)
    _assert_heals_clean(resumed.final)
    assert resumed.bookings == reference.bookings            # no tool ran twice


def test_stop_at_a_random_boundary_then_resume(reference: Execution) -> None:
    count = _boundaries(reference)
    assert count == 3   # before turns 2, 4 and 5 (each leg's first model call has none before it)
    stop_at = random.Random(0x5EED).randrange(count)
    resumed = _execute(stop_at)
    stopped = [cp for cp in resumed.commits if cp.status == "ready"][stop_at]
    assert resumed.storage.count(bl.serialize_loop_checkpoint(stopped)) == 1
    _assert_same_execution(resumed, reference)


@pytest.mark.parametrize("stop_at", [0, 1, 2])
def test_stop_at_every_boundary_then_resume(reference: Execution, stop_at: int) -> None:
    _assert_same_execution(_execute(stop_at), reference)
