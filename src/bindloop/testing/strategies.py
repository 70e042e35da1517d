"""Hypothesis strategies for bindloop values (requires ``hypothesis``; not imported by the kit).

``messages()`` draws valid canonical messages, ``transcripts()`` provider-valid transcripts (every
tool call answered by the tool messages right after it), ``model_turns()`` turns a scripted model can
return.
"""

from __future__ import annotations

import base64
from typing import Any

from hypothesis import strategies as st

from ..contracts import (
    AssistantMessage,
    ContentPart,
    FilePart,
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

__all__ = (
    "content",
    "content_parts",
    "messages",
    "model_turns",
    "tool_calls",
    "transcripts",
    "usages",
)

_text = st.text(max_size=40)
_ident = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_0123456789", min_size=1, max_size=12)


def _json_args() -> st.SearchStrategy[str]:
    import msgspec

    values = st.recursive(
        st.none() | st.booleans() | st.integers(-10**6, 10**6) | _text,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_ident, inner, max_size=3),
        max_leaves=8,
    )
    return st.dictionaries(_ident, values, max_size=4).map(
        lambda d: msgspec.json.encode(d).decode()
    )


def content_parts(*, reasoning: bool = True) -> st.SearchStrategy[ContentPart]:
    detail = st.sampled_from([None, "auto", "low", "high"])
    b64 = st.binary(max_size=12).map(lambda b: base64.b64encode(b).decode())
    media = st.sampled_from(["image/png", "image/jpeg", "image/webp", "application/pdf",
                             "text/plain"])
    url = st.sampled_from(["https://example.test/i.png", "https://example.test/a?b=c&d=é",
                           "gs://bucket/x.pdf"])
    parts: list[st.SearchStrategy[Any]] = [
        st.builds(TextPart, text=_text),
        st.builds(ImagePart, url=url, detail=detail),
        st.builds(ImagePart, data=b64, media_type=media, detail=detail),
        st.builds(FilePart, data=b64, media_type=media, filename=st.none() | _ident),
        st.builds(FilePart, file_id=_ident, filename=st.none() | _ident),
        st.builds(FilePart, url=url, file_id=st.none() | _ident),
    ]
    if reasoning:
        parts.append(st.builds(ReasoningPart, text=_text,
                               provider=st.sampled_from([None, "anthropic", "openai", "google"]),
                               signature=st.none() | _ident))
    return st.one_of(parts)


def content(*, reasoning: bool = False) -> st.SearchStrategy[Any]:
    return _text | st.lists(content_parts(reasoning=reasoning), min_size=1, max_size=3).map(tuple)


def tool_calls(ids: st.SearchStrategy[str] = _ident) -> st.SearchStrategy[ToolCall]:
    return st.builds(ToolCall, id=ids, name=_ident, arguments=_json_args())


def messages() -> st.SearchStrategy[Message]:
    """Any single canonical message (not necessarily valid in context)."""
    return st.one_of(
        st.builds(SystemMessage, content=content()),
        st.builds(UserMessage, content=content()),
        st.builds(AssistantMessage, content=st.none() | content(reasoning=True),
                  tool_calls=st.lists(tool_calls(), max_size=3, unique_by=lambda c: c.id).map(tuple)),
        st.builds(ToolMessage, tool_call_id=_ident, content=content(), is_error=st.booleans()),
    )


@st.composite
def transcripts(draw: st.DrawFn, max_turns: int = 5) -> list[Message]:
    """A provider-valid transcript: optional system, then user/assistant exchanges where every tool
    call is answered immediately by exactly one tool message, with unique ids throughout."""
    out: list[Message] = []
    if draw(st.booleans()):
        out.append(SystemMessage(content=draw(_text)))
    counter = 0
    for _ in range(draw(st.integers(1, max_turns))):
        out.append(UserMessage(content=draw(content())))
        for _ in range(draw(st.integers(0, 2))):
            n = draw(st.integers(1, 3))
            calls = []
            for _ in range(n):
                counter += 1
                calls.append(ToolCall(id=f"call_{counter}", name=draw(_ident),
                                      arguments=draw(_json_args())))
            out.append(AssistantMessage(content=draw(st.none() | _text), tool_calls=tuple(calls)))
            for c in calls:
                out.append(ToolMessage(tool_call_id=c.id, content=draw(_text), name=c.name))
        out.append(AssistantMessage(content=draw(_text)))
    return out


def usages() -> st.SearchStrategy[TurnUsage]:
    return st.builds(TurnUsage, input_tokens=st.integers(0, 10**6),
                     output_tokens=st.integers(0, 10**5),
                     cached_input_tokens=st.integers(0, 10**5))


def model_turns(max_calls: int = 3) -> st.SearchStrategy[ModelTurnResult]:
    """A turn with unique-within-turn call ids (``c0``, ``c1``...; re-mint across turns yourself)."""
    return st.builds(
        lambda text, names, usage, cost: ModelTurnResult(
            text=text,
            tool_calls=tuple(ToolCall(id=f"c{i}", name=n) for i, n in enumerate(names)),
            usage=usage, cost=cost,
        ),
        st.none() | _text,
        st.lists(_ident, max_size=max_calls),
        usages(),
        st.integers(0, 1000),
    )
