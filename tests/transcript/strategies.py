"""Hypothesis strategies for canonical transcripts, including malformed ones.

``transcripts()`` draws arbitrary message lists: orphan and duplicate tool results, dangling and
colliding tool-call ids (ids come from a small pool, so collisions are common), empty assistant turns,
consecutive assistants, system messages anywhere, missing user tails, reasoning blocks of every
provenance. ``well_formed_transcripts()`` draws transcripts every provider accepts as they are.
"""

from __future__ import annotations

from hypothesis import strategies as st

from bindloop.contracts import (
    AssistantMessage,
    ContentPart,
    FilePart,
    ImagePart,
    Message,
    ReasoningPart,
    SystemMessage,
    TextPart,
    ToolCall,
    ToolMessage,
    UserMessage,
)

ID_POOL = ("a", "b", "c", "call_0", "call_1", "a_r1", "call_0_r1")

texts = st.text(alphabet=st.characters(codec="utf-8"), max_size=12)
ids = st.sampled_from(ID_POOL)


@st.composite
def reasoning_parts(draw: st.DrawFn) -> ReasoningPart:
    redacted = draw(st.booleans())
    return ReasoningPart(
        text="" if redacted else draw(texts),
        provider=draw(st.sampled_from([None, "anthropic", "openai", "google", "google-vertex"])),
        model=draw(st.sampled_from([None, "m1"])),
        signature=draw(st.sampled_from([None, "", "sig"])),
        redacted=redacted,
        data="opaque" if redacted else None,
        encrypted_content=draw(st.sampled_from([None, "enc"])),
    )


content_parts: st.SearchStrategy[ContentPart] = st.one_of(
    texts.map(lambda t: TextPart(text=t)),
    st.just(ImagePart(url="https://example.test/i.png")),
    st.just(FilePart(file_id="f1")),
    reasoning_parts(),
)

contents = st.one_of(texts, st.lists(content_parts, max_size=3).map(tuple))
tool_calls = st.builds(ToolCall, id=ids, name=st.sampled_from(["read", "shell"]),
                       arguments=st.sampled_from(["{}", '{"x":1}']))

system_messages = st.builds(SystemMessage, content=contents)
user_messages = st.builds(UserMessage, content=contents)
assistant_messages = st.builds(
    AssistantMessage,
    content=st.one_of(st.none(), contents),
    tool_calls=st.lists(tool_calls, max_size=3).map(tuple),
)
tool_messages = st.builds(ToolMessage, tool_call_id=ids, content=contents,
                          is_error=st.booleans())

messages: st.SearchStrategy[Message] = st.one_of(
    system_messages, user_messages, assistant_messages, tool_messages
)


def transcripts(max_size: int = 14) -> st.SearchStrategy[list[Message]]:
    """Arbitrary, usually malformed, transcripts."""
    return st.lists(messages, max_size=max_size)


@st.composite
def well_formed_transcripts(draw: st.DrawFn, max_rounds: int = 4) -> list[Message]:
    """Transcripts every provider accepts: a system prompt, then rounds of a user prompt followed by
    agentic steps (assistant turn with unique call ids, every call answered right after), each round
    closed by a text answer; the last round may end on tool results or a user prompt instead."""
    out: list[Message] = [SystemMessage(content="be helpful")]
    counter = 0
    rounds = draw(st.integers(1, max_rounds))
    for r in range(rounds):
        out.append(UserMessage(content=draw(texts) or "hi"))
        for _ in range(draw(st.integers(0, 2))):
            n = draw(st.integers(1, 3))
            calls = []
            for _ in range(n):
                calls.append(ToolCall(id=f"t{counter}", name="read"))
                counter += 1
            out.append(AssistantMessage(content=draw(st.one_of(st.none(), st.just("thinking aloud"))),
                                        tool_calls=tuple(calls)))
            out.extend(ToolMessage(tool_call_id=c.id, content=draw(texts)) for c in calls)
        last = r == rounds - 1
        ending = draw(st.sampled_from(["answer", "tools", "user"])) if last else "answer"
        if ending == "answer":
            out.append(AssistantMessage(content="done"))
            out.append(UserMessage(content="next"))
        elif ending == "user" or not isinstance(out[-1], ToolMessage):
            out.append(UserMessage(content="more"))
    return out
