"""What each provider would send back for a given canonical turn: JSON bodies and SSE streams.

Pure functions used by the scripted provider server and by the wire tests (a provider's "echo" of a
turn). They follow the documented shapes of each wire, including usage chunks and terminal events.
"""

from __future__ import annotations

import json
from typing import Any

from bindloop.contracts import ModelTurnResult, ReasoningPart, ToolCall

__all__ = ("render_body", "render_sse", "sse_event")


def _j(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def sse_event(data: object, event: str | None = None) -> bytes:
    head = f"event: {event}\n" if event else ""
    payload = data if isinstance(data, str) else _j(data)
    return (head + "".join(f"data: {line}\n" for line in payload.split("\n")) + "\n").encode()


def _args(call: ToolCall) -> Any:
    try:
        value = json.loads(call.arguments) if call.arguments.strip() else {}
    except ValueError:
        value = None
    return value if isinstance(value, dict) else {"_raw_arguments": call.arguments}


def _halves(text: str) -> list[str]:
    mid = len(text) // 2
    return [p for p in (text[:mid], text[mid:]) if p]


# -- OpenAI Chat -----------------------------------------------------------------------------------

_CHAT_FINISH = {"stop": "stop", "length": "length", "tool_calls": "tool_calls",
                "content_filter": "content_filter"}


def _chat_usage(turn: ModelTurnResult) -> dict[str, Any]:
    u = turn.usage
    out: dict[str, Any] = {"prompt_tokens": u.input_tokens, "completion_tokens": u.output_tokens,
                           "total_tokens": u.input_tokens + u.output_tokens,
                           "prompt_tokens_details": {"cached_tokens": u.cached_input_tokens}}
    if u.cache_write_tokens:  # as OpenRouter reports them
        out["prompt_tokens_details"]["cache_write_tokens"] = u.cache_write_tokens
    if u.reasoning_tokens:
        out["completion_tokens_details"] = {"reasoning_tokens": u.reasoning_tokens}
    return out


def _chat_finish(turn: ModelTurnResult) -> str:
    if turn.finish_reason in _CHAT_FINISH:
        return _CHAT_FINISH[turn.finish_reason]
    return "tool_calls" if turn.tool_calls else "stop"


def _chat_body(turn: ModelTurnResult, model: str) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": turn.text, "refusal": None}
    if turn.tool_calls:
        message["tool_calls"] = [{"id": c.id, "type": "function",
                                  "function": {"name": c.name, "arguments": c.arguments}}
                                 for c in turn.tool_calls]
    return {"id": "chatcmpl-scripted", "object": "chat.completion", "created": 0, "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": _chat_finish(turn)}],
            "usage": _chat_usage(turn)}


def _chat_sse(turn: ModelTurnResult, model: str) -> list[bytes]:
    def chunk(delta: dict[str, Any] | None, finish: str | None = None,
              usage: dict[str, Any] | None = None) -> bytes:
        choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
        return sse_event({"id": "chatcmpl-scripted", "object": "chat.completion.chunk",
                          "created": 0, "model": model, "choices": choices, "usage": usage})

    out = [chunk({"role": "assistant", "content": ""})]
    for piece in _halves(turn.text or ""):
        out.append(chunk({"content": piece}))
    for i, call in enumerate(turn.tool_calls):
        out.append(chunk({"tool_calls": [{"index": i, "id": call.id, "type": "function",
                                          "function": {"name": call.name, "arguments": ""}}]}))
        for piece in _halves(call.arguments):
            out.append(chunk({"tool_calls": [{"index": i, "function": {"arguments": piece}}]}))
    out.append(chunk({}, finish=_chat_finish(turn)))
    out.append(chunk(None, usage=_chat_usage(turn)))
    out.append(sse_event("[DONE]"))
    return out


# -- OpenAI Responses ------------------------------------------------------------------------------

def _responses_items(turn: ModelTurnResult) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for i, part in enumerate(turn.reasoning):
        item: dict[str, Any] = {"id": part.id or f"rs_{i}", "type": "reasoning",
                                "summary": [{"type": "summary_text", "text": part.text}]
                                if part.text else []}
        if part.encrypted_content:
            item["encrypted_content"] = part.encrypted_content
        items.append(item)
    for provider_item in turn.provider_items:  # this wire's own items go back as they came
        if provider_item.wire == "openai_responses":
            items.append(json.loads(provider_item.data))
    if turn.text:
        items.append({"id": "msg_scripted", "type": "message", "role": "assistant",
                      "status": "completed",
                      "content": [{"type": "output_text", "text": turn.text, "annotations": []}]})
    for call in turn.tool_calls:
        items.append({"id": f"fc_{call.id}", "type": "function_call", "status": "completed",
                      "call_id": call.id, "name": call.name, "arguments": call.arguments})
    return items


def _responses_body(turn: ModelTurnResult, model: str) -> dict[str, Any]:
    u = turn.usage
    body: dict[str, Any] = {
        "id": "resp_scripted", "object": "response", "created_at": 0, "model": model,
        "status": "incomplete" if turn.finish_reason == "length" else "completed",
        "output": _responses_items(turn),
        "usage": {"input_tokens": u.input_tokens,
                  "input_tokens_details": {"cached_tokens": u.cached_input_tokens},
                  "output_tokens": u.output_tokens,
                  "total_tokens": u.input_tokens + u.output_tokens},
    }
    if u.reasoning_tokens:
        body["usage"]["output_tokens_details"] = {"reasoning_tokens": u.reasoning_tokens}
    if turn.finish_reason == "length":
        body["incomplete_details"] = {"reason": "max_output_tokens"}
    return body


def _responses_sse(turn: ModelTurnResult, model: str) -> list[bytes]:
    body = _responses_body(turn, model)
    created = {**body, "status": "in_progress", "output": [], "usage": None}
    out = [sse_event({"type": "response.created", "response": created}, "response.created")]
    for index, item in enumerate(body["output"]):
        def ev(kind: str, **fields: Any) -> bytes:
            return sse_event({"type": kind, "output_index": index, **fields}, kind)
        if item["type"] == "reasoning":
            out.append(ev("response.output_item.added",
                          item={"id": item["id"], "type": "reasoning", "summary": []}))
            for s, summary in enumerate(item["summary"]):
                for piece in _halves(summary["text"]):
                    out.append(ev("response.reasoning_summary_text.delta", item_id=item["id"],
                                  summary_index=s, delta=piece))
            out.append(ev("response.output_item.done", item=item))
        elif item["type"] == "message":
            out.append(ev("response.output_item.added", item={**item, "content": []}))
            for piece in _halves(item["content"][0]["text"]):
                out.append(ev("response.output_text.delta", item_id=item["id"], content_index=0,
                              delta=piece))
            out.append(ev("response.output_item.done", item=item))
        elif item["type"] != "function_call":  # an item the canonical turn carries whole
            out.append(ev("response.output_item.added", item=item))
            out.append(ev("response.output_item.done", item=item))
        else:
            out.append(ev("response.output_item.added", item={**item, "arguments": ""}))
            for piece in _halves(item["arguments"]):
                out.append(ev("response.function_call_arguments.delta", item_id=item["id"],
                              delta=piece))
            out.append(ev("response.output_item.done", item=item))
    final = "response.incomplete" if body["status"] == "incomplete" else "response.completed"
    out.append(sse_event({"type": final, "response": body}, final))
    return out


# -- Anthropic -------------------------------------------------------------------------------------

_ANTHROPIC_STOP = {"length": "max_tokens", "content_filter": "refusal", "tool_calls": "tool_use"}


def _anthropic_blocks(turn: ModelTurnResult) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for part in turn.reasoning:
        if part.redacted:
            blocks.append({"type": "redacted_thinking", "data": part.data or ""})
        else:
            blocks.append({"type": "thinking", "thinking": part.text,
                           "signature": part.signature or ""})
    if turn.text:
        blocks.append({"type": "text", "text": turn.text})
    for call in turn.tool_calls:
        blocks.append({"type": "tool_use", "id": call.id, "name": call.name, "input": _args(call)})
    return blocks


def _anthropic_usage(turn: ModelTurnResult) -> dict[str, Any]:
    u = turn.usage
    return {"input_tokens": max(0, u.input_tokens - u.cached_input_tokens - u.cache_write_tokens),
            "cache_read_input_tokens": u.cached_input_tokens,
            "cache_creation_input_tokens": u.cache_write_tokens, "output_tokens": u.output_tokens}


def _anthropic_stop(turn: ModelTurnResult) -> str:
    if turn.finish_reason in _ANTHROPIC_STOP:
        return _ANTHROPIC_STOP[turn.finish_reason]
    return "tool_use" if turn.tool_calls else "end_turn"


def _anthropic_body(turn: ModelTurnResult, model: str) -> dict[str, Any]:
    return {"id": "msg_scripted", "type": "message", "role": "assistant", "model": model,
            "content": _anthropic_blocks(turn), "stop_reason": _anthropic_stop(turn),
            "stop_sequence": None, "usage": _anthropic_usage(turn)}


def _anthropic_sse(turn: ModelTurnResult, model: str) -> list[bytes]:
    usage = _anthropic_usage(turn)
    start: dict[str, Any] = {"id": "msg_scripted", "type": "message", "role": "assistant", "model": model,
             "content": [], "stop_reason": None, "stop_sequence": None,
             "usage": {**usage, "output_tokens": min(1, usage["output_tokens"])}}

    def ev(kind: str, **fields: Any) -> bytes:
        return sse_event({"type": kind, **fields}, kind)

    out = [ev("message_start", message=start), ev("ping")]
    for index, block in enumerate(_anthropic_blocks(turn)):
        kind = block["type"]
        if kind == "thinking":
            out.append(ev("content_block_start", index=index,
                          content_block={"type": "thinking", "thinking": "", "signature": ""}))
            for piece in _halves(block["thinking"]):
                out.append(ev("content_block_delta", index=index,
                              delta={"type": "thinking_delta", "thinking": piece}))
            if block["signature"]:
                out.append(ev("content_block_delta", index=index,
                              delta={"type": "signature_delta", "signature": block["signature"]}))
        elif kind == "redacted_thinking":
            out.append(ev("content_block_start", index=index, content_block=block))
        elif kind == "text":
            out.append(ev("content_block_start", index=index,
                          content_block={"type": "text", "text": ""}))
            for piece in _halves(block["text"]):
                out.append(ev("content_block_delta", index=index,
                              delta={"type": "text_delta", "text": piece}))
        else:
            out.append(ev("content_block_start", index=index,
                          content_block={**block, "input": {}}))
            for piece in _halves(_j(block["input"])):
                out.append(ev("content_block_delta", index=index,
                              delta={"type": "input_json_delta", "partial_json": piece}))
        out.append(ev("content_block_stop", index=index))
    out.append(ev("message_delta", delta={"stop_reason": _anthropic_stop(turn),
                                          "stop_sequence": None},
                  usage={"output_tokens": usage["output_tokens"]}))
    out.append(ev("message_stop"))
    return out


# -- Gemini ----------------------------------------------------------------------------------------

_GEMINI_FINISH = {"length": "MAX_TOKENS", "content_filter": "SAFETY"}


def _gemini_parts(turn: ModelTurnResult) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    loose: list[ReasoningPart] = []
    for part in turn.reasoning:
        if part.text:
            p: dict[str, Any] = {"text": part.text, "thought": True}
            if part.signature:
                p["thoughtSignature"] = part.signature
            parts.append(p)
        elif part.signature:
            loose.append(part)
    if turn.text:
        parts.append({"text": turn.text})
    calls: list[dict[str, Any]] = [{"functionCall": {"id": c.id, "name": c.name, "args": _args(c)}}
                                   for c in turn.tool_calls]
    if loose:
        target: dict[str, Any] | None = calls[0] if calls else (parts[-1] if parts and not parts[-1].get("thought")
                                         else None)
        if target is None:
            target = {"text": ""}
            parts.append(target)
        target["thoughtSignature"] = loose[0].signature
    return parts + calls


def _gemini_usage(turn: ModelTurnResult) -> dict[str, Any]:
    u = turn.usage
    out = {"promptTokenCount": u.input_tokens,
           "candidatesTokenCount": u.output_tokens - u.reasoning_tokens,
           "cachedContentTokenCount": u.cached_input_tokens,
           "totalTokenCount": u.input_tokens + u.output_tokens}
    if u.reasoning_tokens:  # Gemini reports thoughts apart from the candidates' tokens
        out["thoughtsTokenCount"] = u.reasoning_tokens
    return out


def _gemini_body(turn: ModelTurnResult, model: str) -> dict[str, Any]:
    return {"candidates": [{"content": {"role": "model", "parts": _gemini_parts(turn)},
                            "finishReason": _GEMINI_FINISH.get(turn.finish_reason or "", "STOP"),
                            "index": 0}],
            "usageMetadata": _gemini_usage(turn), "modelVersion": model,
            "responseId": "scripted"}


def _gemini_sse(turn: ModelTurnResult, model: str) -> list[bytes]:
    parts = _gemini_parts(turn)
    out = []
    for part in parts[:-1]:
        out.append(sse_event({"candidates": [{"content": {"role": "model", "parts": [part]},
                                              "index": 0}],
                              "modelVersion": model, "responseId": "scripted"}))
    last = {**_gemini_body(turn, model)}
    last["candidates"] = [{**last["candidates"][0],
                           "content": {"role": "model", "parts": parts[-1:]}}]
    out.append(sse_event(last))
    return out


_BODIES = {"openai_chat": _chat_body, "openai_responses": _responses_body,
           "anthropic": _anthropic_body, "gemini": _gemini_body}
_STREAMS = {"openai_chat": _chat_sse, "openai_responses": _responses_sse,
            "anthropic": _anthropic_sse, "gemini": _gemini_sse}


def render_body(wire: str, turn: ModelTurnResult, *, model: str = "scripted-model") -> bytes:
    """The non-streamed response body ``wire`` would send for ``turn``."""
    return _j(_BODIES[wire](turn, model)).encode()


def render_sse(wire: str, turn: ModelTurnResult, *, model: str = "scripted-model") -> list[bytes]:
    """The SSE events (one ``bytes`` per event) ``wire`` would stream for ``turn``."""
    return _STREAMS[wire](turn, model)
