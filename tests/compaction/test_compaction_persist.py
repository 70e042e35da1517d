from __future__ import annotations

import hashlib

import anyio
from hypothesis import given, settings
from hypothesis import strategies as st

from bindloop.compaction import (
    PERSISTED_OUTPUT_PREFIX,
    PREVIEW_SIZE_BYTES,
    build_persisted_stub,
    decide_persist_tool_output,
    persist_tool_output,
    utf8_byte_length,
    utf8_prefix,
)
from bindloop.contracts import ImagePart, TextPart, ToolMessage

GOLDEN_TEXT = "line\n" * 1000 + "é🙂" * 700


def test_stub_golden_bytes() -> None:
    # The stub is re-sent every turn: these bytes are a compatibility contract (prompt caches).
    stub = build_persisted_stub(GOLDEN_TEXT, '/data/s1/tool-results/call "7".txt')
    assert stub.startswith(PERSISTED_OUTPUT_PREFIX + 'bytes="9200" path="/data/s1/tool-results/'
                           'call &quot;7&quot;.txt">\n')
    assert stub.endswith("\n</persisted-output>")
    # Golden digest: any change to the format changes every in-flight session's prompt-cache prefix.
    assert hashlib.sha256(stub.encode()).hexdigest() == (
        "6627f4557d223bad2564e34e388ff84dd316b6c977490a1faa2579574e36a49a")
    assert "First 2048 bytes:\n" + "line\n" * 409 + "lin\n</persisted-output>" in stub


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=3000), st.text(max_size=40))
def test_stub_is_deterministic_and_preview_is_a_bounded_head(text: str, path: str) -> None:
    a = build_persisted_stub(text, path)
    assert a == build_persisted_stub(text, path)
    preview = utf8_prefix(text, PREVIEW_SIZE_BYTES)
    assert text.startswith(preview)
    assert utf8_byte_length(preview) <= PREVIEW_SIZE_BYTES
    if preview != text:  # maximal: one more character would overflow
        assert utf8_byte_length(text[:len(preview) + 1]) > PREVIEW_SIZE_BYTES
    assert f'bytes="{utf8_byte_length(text)}"' in a
    assert "\n" not in a.split(">\n", 1)[0]  # attributes stay on the first line


def test_decide_and_persist() -> None:
    small = ToolMessage(tool_call_id="c", content="tiny")
    assert decide_persist_tool_output(small, path="/p") is None
    big = ToolMessage(tool_call_id="c", content=(TextPart(text="a" * 40), TextPart(text="b" * 40)),
                      is_error=True)
    plan = decide_persist_tool_output(big, path="/p", threshold_bytes=50)
    assert plan is not None and plan.text == "a" * 40 + "b" * 40 and plan.byte_count == 80
    assert plan.message.is_error and plan.message.tool_call_id == "c"
    assert plan.message.content == build_persisted_stub(plan.text, "/p")
    assert decide_persist_tool_output(plan.message, path="/p", threshold_bytes=1) is None
    mixed = ToolMessage(tool_call_id="c", content=(TextPart(text="a" * 99), ImagePart(url="u")))
    assert decide_persist_tool_output(mixed, path="/p", threshold_bytes=1) is None

    written: dict[str, str] = {}

    async def write(path: str, text: str) -> None:
        written[path] = text

    out = anyio.run(lambda: persist_tool_output(big, path="/p", write=write, threshold_bytes=50))
    assert out == plan.message and written == {"/p": plan.text}

    errors: list[BaseException] = []

    def failing(path: str, text: str) -> None:
        raise OSError("disk full")

    out = anyio.run(lambda: persist_tool_output(big, path="/p", write=failing, threshold_bytes=50,
                                                on_write_error=errors.append))
    assert out is big and isinstance(errors[0], OSError)
