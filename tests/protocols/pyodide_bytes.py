# The protocol encoders and decoders over a fixed, pseudo-random run (a seeded LCG: no Hypothesis,
# no randomness source), reduced to one SHA-256 of every byte they produce. The same file runs under
# CPython (tests/protocols/test_pyodide_bytes.py) and under Pyodide in Node (harness/wasm/run_smoke.mjs):
# the digests must be equal. Its value is the last expression, as run_smoke prints it.
import hashlib

import msgspec

from bindloop.agent.events import (
    ApprovalRequestedEvent,
    ToolCallDoneEvent,
    ToolFinishedEvent,
    TurnStartEvent,
)
from bindloop.completion import (
    FinishEvent,
    ReasoningEvent,
    TextEvent,
    ToolCallChunk,
    ToolCallEvent,
    UsageEvent,
)
from bindloop.textstream import TurnResetEvent, TurnTextEvent
from bindloop.contracts import ReasoningPart, ToolCall, ToolResult, ToolSuspend, TurnUsage
from bindloop.protocols import (
    AgUiEncoder,
    UIStreamEncoder,
    decode_run_agent_input,
    decode_ui_chat_request,
    encode_ag_ui_event,
    encode_ui_chunk,
    sse_frame,
)


def _kind(cls, turn, **fields):
    if "turn_index" in cls.__struct_fields__:
        fields["turn_index"] = turn
    return cls(**fields)


def _events(n):
    state = 12345
    turn = 0
    out = []
    words = ["lorem ", "ipsum ", "d\u00f6lor ", "\u2603 ", "\"q\" ", "a\nb ", "\U0001f600 "]
    for i in range(n):
        state = (state * 1103515245 + 12345) % 2**31
        op = state % 11
        if op == 0:
            turn += 1
            out.append((turn, _kind(TurnStartEvent, turn)))
        elif op <= 4:
            out.append((turn, TextEvent(content=words[state % len(words)])))
        elif op == 5:
            out.append((turn, ReasoningEvent(part=ReasoningPart(text="hm "), index=state % 2)))
        elif op == 6:
            out.append((turn, ToolCallEvent(tool_call=ToolCallChunk(
                index=0, id=f"c{turn}", name="wc", arguments='{"t":'))))
        elif op == 7:
            call = ToolCall(id=f"c{turn}", name="wc", arguments='{"t":1}')
            out.append((turn, _kind(ToolCallDoneEvent, turn, tool_call=call)))
            out.append((None, ToolFinishedEvent(call=call, outcome=ToolResult(content=str(i)))))
        elif op == 8:
            out.append((turn, UsageEvent(usage=TurnUsage(input_tokens=i, output_tokens=i // 2))))
        elif op == 9:
            out.append((turn, TurnResetEvent(turn_id="t", epoch=i, seq=i, reason="fallback")))
            out.append((turn, TurnTextEvent(turn_id="t", epoch=i, seq=i + 1, text="retry ")))
        else:
            out.append((turn, FinishEvent(finish_reason="tool_calls")))
    out.append((None, ToolFinishedEvent(call=ToolCall(id="c1", name="wc", arguments="{}"),
                                        outcome=ToolSuspend(mode="waiting_for_reply",
                                                            detail="which?"))))
    out.append((None, ApprovalRequestedEvent(call_id="c0", tool="wc", arguments="{}")))
    return out


def digest():
    h = hashlib.sha256()
    events = _events(1500)
    ui = UIStreamEncoder("m1", known_calls=["c0"])
    chunks = ui.start()
    for turn, event in events:
        chunks += ui.feed(event, turn_index=turn)
    chunks += ui.finish()
    for offset, chunk in enumerate(chunks):
        h.update(sse_frame(encode_ui_chunk(chunk), event_id=offset))
    ag = AgUiEncoder(thread_id="t", run_id="r")
    out = ag.start()
    for turn, event in events:
        out += ag.feed(event, turn_index=turn)
    out += ag.finish({"ok": True})
    for offset, event in enumerate(out):
        h.update(sse_frame(encode_ag_ui_event(event), event_id=offset))
    request = decode_ui_chat_request(msgspec.json.encode({"id": "c", "messages": [
        {"id": "u", "role": "user", "parts": [{"type": "text", "text": "h\u00e9"}]},
        {"id": "a", "role": "assistant", "parts": [
            {"type": "step-start"}, {"type": "reasoning", "text": "r"},
            {"type": "tool-wc", "toolCallId": "c", "state": "output-available",
             "input": {"t": [1, 2.5, None, "\u2603"]}, "output": {"n": 1}}]}]}))
    h.update(msgspec.json.encode(request.transcript))
    run = decode_run_agent_input(msgspec.json.encode({"threadId": "t", "runId": "r", "messages": [
        {"id": "u", "role": "user", "content": "x"},
        {"id": "a", "role": "assistant", "toolCalls": [
            {"id": "c", "type": "function", "function": {"name": "wc", "arguments": "{}"}}]},
        {"id": "m", "role": "tool", "toolCallId": "c", "content": "1"}]}))
    h.update(msgspec.json.encode(run.transcript))
    return f"{len(chunks)} {len(out)} {h.hexdigest()}"


digest()
