"""Checks on the ``real_*`` fixtures beyond the shared turn table of test_wire_fixtures.py:
provenance where it can be verified, recordings that wrap a body, and real error bodies."""

from __future__ import annotations

import hashlib
import json


from bindloop.errors import PromptTooLongError
from bindloop.wire import create_wire_adapter

from .wire_fixtures import FIXTURES, fixture
from .wire_real_fixtures import ANTHROPIC_RECORDING_TURNS, REAL_EXPECTED

# inline-snapshot names an external snapshot by the SHA-256 of its bytes, so this file's published
# name in openai/openai-python (.inline-snapshot/external/<sha256>.bin) pins its exact content.
_OPENAI_SNAPSHOT_SHA256 = "453df473e96274dd8ab61ab4d13dfcc25dc2f57a5e05eb5cc46c70b51d8845c2"

_DEDICATED = {
    ("anthropic", "real_sdk_tool_runner_recording.json"),
    ("gemini", "real_firebase_error_api_key.json"),
}


def test_every_real_fixture_is_checked() -> None:
    found = {(p.parent.name, p.name) for p in FIXTURES.glob("*/real_*")}
    assert found == set(REAL_EXPECTED) | _DEDICATED


def test_openai_stream_is_the_published_snapshot_byte_for_byte() -> None:
    data = fixture("openai_chat", "real_sdk_stream_parallel_tool_calls.sse")
    assert hashlib.sha256(data).hexdigest() == _OPENAI_SNAPSHOT_SHA256


def test_gemini_stream_keeps_the_services_crlf_line_ends() -> None:
    data = fixture("gemini", "real_firebase_thinking_function_call_stream.sse")
    assert data.count(b"\r\n\r\n") == 3 and b"\n" not in data.replace(b"\r\n", b"")


def test_anthropic_recorded_exchanges_decode_to_their_turns() -> None:
    """The anthropic-sdk-python recording holds request/response pairs; each response body, as
    recorded, is what the adapter parses (re-encoding the parsed JSON changes no value)."""
    recording = json.loads(fixture("anthropic", "real_sdk_tool_runner_recording.json"))
    assert len(recording) == len(ANTHROPIC_RECORDING_TURNS)
    adapter = create_wire_adapter("anthropic")
    for exchange, expected in zip(recording, ANTHROPIC_RECORDING_TURNS, strict=True):
        assert exchange["response"]["status_code"] == 200
        body = json.dumps(exchange["response"]["body"]).encode()
        assert adapter.parse_response(body) == expected


def test_gemini_invalid_api_key_body_is_read() -> None:
    err = create_wire_adapter("gemini").classify_error(
        400, (), fixture("gemini", "real_firebase_error_api_key.json"))
    assert err.error_type == "INVALID_ARGUMENT"
    assert err.status_code == 400
    assert err.retry_after_ms is None
    assert "API key not valid" in str(err)
    assert not isinstance(err, PromptTooLongError)


def test_gemini_invalid_api_key_is_an_auth_error() -> None:
    err = create_wire_adapter("gemini").classify_error(
        400, (), fixture("gemini", "real_firebase_error_api_key.json"))
    assert err.category == "auth"
