"""Hypothesis strategies for the wire tests: well-formed transcripts with every part the wires carry,
and model turns."""

from __future__ import annotations

import json

from hypothesis import strategies as st

from bindloop.contracts import (
    AssistantMessage,
    ImagePart,
    Message,
    ModelTurnResult,
    ReasoningPart,
    SystemMessage,
    TextPart,
    ToolCall,
    ToolMessage,
    TurnUsage,
    UserMessage,
)

texts = st.text(st.characters(codec="utf-8", blacklist_categories=("Cs",)), min_size=1, max_size=10)
names = st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10**6, 10**6) | texts,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(names, inner, max_size=3),
    max_leaves=6,
)
arguments = st.dictionaries(names, json_values, max_size=3).map(
    lambda d: json.dumps(d, ensure_ascii=False, separators=(",", ":")))


@st.composite
def reasoning_blocks(draw: st.DrawFn, index: int) -> ReasoningPart:
    kind = draw(st.sampled_from(["anthropic", "redacted", "openai", "google", "bare"]))
    if kind == "redacted":
        return ReasoningPart(provider="anthropic", redacted=True, data=f"opaque{index}")
    if kind == "anthropic":
        return ReasoningPart(text=draw(texts), provider="anthropic", signature=f"sig{index}")
    if kind == "openai":
        return ReasoningPart(text=draw(texts), provider="openai", encrypted_content=f"enc{index}",
                             id=f"rs_{index}")
    if kind == "google":
        return ReasoningPart(text=draw(texts), provider="google", signature=f"gsig{index}")
    return ReasoningPart(text=draw(texts))


@st.composite
def transcripts(draw: st.DrawFn) -> list[Message]:
    out: list[Message] = [SystemMessage(content=draw(texts))]
    counter = 0
    for _ in range(draw(st.integers(1, 3))):
        if draw(st.booleans()):
            out.append(UserMessage(content=(TextPart(text=draw(texts)),
                                            ImagePart(data="iVBORw0KGgo=", media_type="image/png"))))
        else:
            out.append(UserMessage(content=draw(texts)))
        for _ in range(draw(st.integers(0, 2))):
            reasoning = [draw(reasoning_blocks(counter + k)) for k in range(draw(st.integers(0, 2)))]
            text = draw(st.one_of(st.none(), texts))
            calls = []
            for _ in range(draw(st.integers(1, 3))):
                calls.append(ToolCall(id=f"call_{counter}", name=draw(names),
                                      arguments=draw(arguments)))
                counter += 1
            parts = (*reasoning, *([TextPart(text=text)] if text else []))
            out.append(AssistantMessage(content=parts or None, tool_calls=tuple(calls)))
            # Sometimes the user speaks before the results are in (a steering message sent while
            # the tools ran): the text lands between the tool_use and (some of) its results.
            interject = draw(st.one_of(st.none(), st.integers(0, len(calls) - 1)))
            for k, c in enumerate(calls):
                if k == interject:
                    out.append(UserMessage(content=draw(texts)))
                out.append(ToolMessage(tool_call_id=c.id, name=c.name, content=draw(texts),
                                       is_error=draw(st.booleans())))
        out.append(AssistantMessage(content=draw(texts)))
    out.append(UserMessage(content=draw(texts)))
    return out


@st.composite
def turns(draw: st.DrawFn, wire: str) -> ModelTurnResult:
    """A turn as the named wire can produce it (its own reasoning provenance)."""
    calls = tuple(ToolCall(id=f"id_{i}", name=draw(names), arguments=draw(arguments))
                  for i in range(draw(st.integers(0, 3))))
    reasoning: tuple[ReasoningPart, ...] = ()
    if wire == "anthropic":
        reasoning = tuple(
            ReasoningPart(provider="anthropic", redacted=True, data="opaque")
            if draw(st.booleans()) else
            ReasoningPart(text=draw(texts), provider="anthropic", signature=f"s{i}")
            for i in range(draw(st.integers(0, 2))))
    elif wire == "openai_responses":
        reasoning = tuple(ReasoningPart(text=draw(texts), provider="openai",
                                        encrypted_content=f"e{i}", id=f"rs_{i}")
                          for i in range(draw(st.integers(0, 2))))
    elif wire == "gemini" and draw(st.booleans()):
        reasoning = (ReasoningPart(text=draw(texts), provider="google", signature="g0"),)
    text = draw(st.one_of(st.none(), texts))
    if not (text or calls or reasoning):
        text = "x"
    inp = draw(st.integers(0, 10_000))
    out = draw(st.integers(0, 5000))
    cached = draw(st.integers(0, inp))
    # The details each wire reports: reasoning (not Anthropic, whose thinking is in the output),
    # cache writes (Anthropic; OpenRouter's chat usage).
    thought = 0 if wire == "anthropic" else draw(st.integers(0, out))
    written = draw(st.integers(0, inp - cached)) if wire in ("anthropic", "openai_chat") else 0
    usage = TurnUsage(input_tokens=inp, output_tokens=out, cached_input_tokens=cached,
                      reasoning_tokens=thought, cache_write_tokens=written)
    finish = "tool_calls" if calls else draw(st.sampled_from(["stop", "length"]))
    return ModelTurnResult(text=text, tool_calls=calls, reasoning=reasoning, usage=usage,
                           finish_reason=finish)
