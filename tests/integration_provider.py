"""The scripted provider of the full-stack integration test: a deterministic "model" that reads
the transcript each request carries, served on two real wires by
``harness.fixtures.scripted_server``.

The next turn is a function of the last tool result in the request (or of its absence), so the
provider is stateless: a run resumed in another "process" asks the same questions and gets the
same answers, which is what lets the test compare an interrupted execution with an uninterrupted
one. Misbehaviour is scripted the same way: the primary answers ``503`` to the first turn and cuts
its stream after some text on the last one.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from bindloop import ModelTurnResult, TurnUsage
from harness.fixtures.scripted_server import RecordedRequest, ScriptedReply, error_reply, turn_reply
from bindloop.testing import final_answer, tool_call, tool_call_turn

START = "start"

# key (the last answered tool call id, or START) -> the model's turn
TURNS: dict[str, ModelTurnResult] = {
    START: tool_call_turn([
        tool_call("activate_plugin", {"name": "travel"}, id="c1"),
        tool_call("book_trip", {"leg": {"origin": "AMS", "destination": "LIS"},
                                "passenger": "Ada", "notes": "window if possible"}, id="c2"),
        tool_call("load_skill", {"ref": "platform:travel-policy"}, id="c3"),
    ], text="Loading the travel tools and our policy.", usage=TurnUsage(input_tokens=120,
                                                                       output_tokens=30)),
    "c3": tool_call_turn([tool_call("ask_user", {"question": "Window or aisle on the way back?"},
                                    id="c4")],
                         usage=TurnUsage(input_tokens=300, output_tokens=20)),
    "c4": tool_call_turn([tool_call("book_trip", {"leg": {"origin": "LIS", "destination": "AMS"},
                                                  "passenger": "Ada"}, id="c5")],
                         text="Booking the return leg.",
                         usage=TurnUsage(input_tokens=900, output_tokens=25)),
    "c5": tool_call_turn([tool_call("itinerary", id="c6")], text="Reading the itinerary back.",
                         usage=TurnUsage(input_tokens=260, output_tokens=15)),
    "c6": final_answer("Booked AMS->LIS (window) and LIS->AMS (aisle) for Ada.",
                       usage=TurnUsage(input_tokens=280, output_tokens=40)),
}
SUMMARY = final_answer("Ada flies AMS->LIS; travel tools and policy are loaded.",
                       usage=TurnUsage(input_tokens=410, output_tokens=35))
MODEL_TURN_KEYS = (START, "c3", "c4", "c5", "c6")

_UNAVAILABLE = b'{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}'
# The Anthropic stream of a text-only turn is message_start, ping, content_block_start, then the
# text in two deltas: cut after the first delta, so the surface has shown half an answer.
_CUT_AFTER_FIRST_TEXT_DELTA = 4


def anthropic_key(body: dict[str, Any]) -> str:
    last = body["messages"][-1]
    content = last["content"] if isinstance(last["content"], list) else []
    ids = [b["tool_use_id"] for b in content if b.get("type") == "tool_result"]
    return ids[-1] if ids else START


def chat_key(body: dict[str, Any]) -> str:
    last = body["messages"][-1]
    return last["tool_call_id"] if last["role"] == "tool" else START


def anthropic_system(body: dict[str, Any]) -> str:
    system = body.get("system") or []
    return system if isinstance(system, str) else "\n".join(b["text"] for b in system)


def chat_system(body: dict[str, Any]) -> str:
    first = body["messages"][0]
    return first["content"] if first["role"] == "system" else ""


def anthropic_tools(body: dict[str, Any]) -> list[str]:
    return [t["name"] for t in body.get("tools", [])]


def chat_tools(body: dict[str, Any]) -> list[str]:
    return [t["function"]["name"] for t in body.get("tools", [])]


def primary(request: RecordedRequest) -> ScriptedReply:
    key = anthropic_key(json.loads(request.body))
    if key == START:
        return error_reply(503, _UNAVAILABLE)
    if key == "c6":
        return turn_reply("anthropic", TURNS[key], stream=True,
                          drop_after=_CUT_AFTER_FIRST_TEXT_DELTA)
    return turn_reply("anthropic", TURNS[key], stream=True)


def backup(request: RecordedRequest) -> ScriptedReply:
    return turn_reply("openai_chat", TURNS[chat_key(json.loads(request.body))], stream=True)


def summarizer(request: RecordedRequest) -> ScriptedReply:
    return turn_reply("openai_chat", SUMMARY, stream=False)


RESPONDERS: dict[str, Callable[[RecordedRequest], ScriptedReply]] = {
    "primary": primary, "backup": backup, "summarizer": summarizer,
}


def decoded(request: RecordedRequest) -> tuple[str, str, list[str], dict[str, Any]]:
    """(prefix, system prompt, tool names, body) of a recorded request, whatever its wire."""
    prefix = request.path.lstrip("/").split("/", 1)[0]
    body = json.loads(request.body)
    if prefix == "primary":
        return prefix, anthropic_system(body), anthropic_tools(body), body
    return prefix, chat_system(body), chat_tools(body), body


def key_of(request: RecordedRequest) -> str:
    prefix, _, _, body = decoded(request)
    return anthropic_key(body) if prefix == "primary" else chat_key(body)
