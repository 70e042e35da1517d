"""Fuzz targets: every parser that takes outside bytes, with the errors each may raise.

A target takes one input (bytes) and runs the parser over it; a raise of anything but the
target's documented errors is a finding. Inputs are generated and mutated from real payload
shapes: the recorded provider exchanges in ``/work/shared/realwire-fixtures`` (when present) and
the repository's own ``tests/fixtures``, plus structure-aware mutations (huge integers, lone
surrogate escapes, deep nesting, wrong types) and byte-level ones (flips, truncation, splices).
The hostile giants — a 1 GB line, an endless stream of tiny events, 100,000-deep nesting — are
separate budgeted cases (:data:`GIANTS`).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml as pyyaml

from bindloop.completion import ToolCallDeltaError
from bindloop.tools import UnparseableArguments, parse_tool_call_arguments
from bindloop.agent.partial_json import PartialJsonParser, parse_partial_json
from bindloop.checkpoints import CheckpointFormatError, parse_loop_checkpoint
from bindloop.skills import SkillFormatError, parse_skill_markdown
from bindloop.schema import SchemaSanitizeError, sanitize_tool_schema
from bindloop.wire import (
    AnthropicAdapter,
    GeminiAdapter,
    IncompleteStreamError,
    OpenAIChatAdapter,
    OpenAIResponsesAdapter,
    ProviderHttpError,
    SseDecoder,
    SseError,
    WireStream,
    WireAdapter,
    WireDecodeError,
)

ROOT = Path(__file__).resolve().parents[2]
REALWIRE = Path("/work/shared/realwire-fixtures")
WIRES: dict[str, Callable[[], WireAdapter]] = {
    "openai_chat": OpenAIChatAdapter, "openai_responses": OpenAIResponsesAdapter,
    "anthropic": AnthropicAdapter, "gemini": GeminiAdapter,
}
DEEP = 100_000


class Yaml:
    def parse(self, text: str) -> Any:
        return pyyaml.safe_load(text)

    def stringify(self, value: Any) -> str:
        return str(pyyaml.safe_dump(dict(value)))


YAML = Yaml()


@dataclass(frozen=True)
class Target:
    name: str
    run: Callable[[bytes], object]
    allowed: tuple[type[BaseException], ...]
    seeds: tuple[bytes, ...]


def _files(wire: str, suffix: str) -> list[Path]:
    out: list[Path] = []
    for base in (REALWIRE / wire, ROOT / "tests" / "fixtures" / wire):
        if base.is_dir():
            out += sorted(p for p in base.iterdir() if p.suffix == suffix)
    return out


def _chunks(data: bytes, rng: random.Random) -> Iterator[bytes]:
    i = 0
    while i < len(data):
        n = rng.choice((1, 3, 17, 256, 4096, len(data)))
        yield data[i:i + n]
        i += n


def _stream(adapter: Callable[[], WireAdapter]) -> Callable[[bytes], object]:
    def run(data: bytes) -> object:
        decoder = WireStream(adapter().stream_decoder())
        rng = random.Random(len(data))
        events: list[object] = []
        for chunk in _chunks(data, rng):
            events += decoder.feed(chunk)
        events += decoder.end()
        return events
    return run


def _classify(adapter: Callable[[], WireAdapter]) -> Callable[[bytes], object]:
    def run(data: bytes) -> object:
        status = 400 + data[:1][0] % 200 if data else 500
        headers = (("retry-after", data[-12:].decode("latin-1")),) if data[-1:] == b"s" else ()
        out = adapter().classify_error(status, headers, data)
        if not isinstance(out, ProviderHttpError):
            raise TypeError(f"classify_error returned {type(out).__name__}")
        str(out).encode("utf-8")  # the message must stay encodable
        return out
    return run


def _sse(data: bytes) -> object:
    decoder = SseDecoder(max_line_bytes=1 << 20, max_event_bytes=4 << 20)
    events: list[object] = []
    for chunk in _chunks(data, random.Random(len(data))):
        events += decoder.feed(chunk)
    decoder.end()
    return events


def _checkpoint(data: bytes) -> object:
    return parse_loop_checkpoint(data)


def _skill(data: bytes) -> object:
    return parse_skill_markdown(data.decode("utf-8", "replace"), yaml=YAML)


def _sanitize(data: bytes) -> object:
    try:
        schema = json.loads(data)
    except (ValueError, RecursionError):
        return None  # not JSON: the sanitizer takes a decoded value (bytes go through json first)
    return sanitize_tool_schema(schema)


def _partial(data: bytes) -> object:
    text = data.decode("utf-8", "replace")
    whole = parse_partial_json(text)
    parser = PartialJsonParser()
    last = parser.result()
    for chunk in _chunks(data, random.Random(len(data))):
        last = parser.feed(chunk.decode("utf-8", "replace"))
    if whole.state == "complete" and text.isascii() and last.state != "complete":
        raise AssertionError("chunked feed disagrees with the one-shot parse")
    return last.value


def _arguments(data: bytes) -> object:
    # surrogatepass: a model's text can hold a lone surrogate (issue 23); the reader must answer
    # with a verdict, never raise.
    text = data.decode("utf-8", "surrogatepass") if _utf8ish(data) else data.decode("latin-1")
    verdict = parse_tool_call_arguments(text)
    if isinstance(verdict, UnparseableArguments):
        verdict.detail.encode("utf-8")  # the detail goes to the model: it must be sendable
    parse_tool_call_arguments({"type": "function", "function": {"arguments": text}})
    return verdict


def _utf8ish(data: bytes) -> bool:
    try:
        data.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:
        return False
    return True


# Issue 23's shapes, beside the fixtures (which hold them too): tool arguments with lone
# surrogates, raw (the surrogatepass bytes) and escaped.
_ARGUMENT_SEEDS = (
    b"\\ud800", b"\xed\xa0\x80", b'{"a": "x\xed\xbf\xbf"}',
    b'{"a": "\\ud83d\\ude00", "b": [1, 2.5e3, null, true]}', b"", b"  ", b"[1]", b"1e999",
)


def _checkpoint_seeds() -> tuple[bytes, ...]:
    from bindloop.contracts import AssistantMessage, ToolCall, ToolMessage, UserMessage
    from bindloop.checkpoints import create_loop_checkpoint, serialize_loop_checkpoint

    cp = create_loop_checkpoint(execution_id="seed", max_iterations=5, messages=[
        UserMessage(content="hi"),
        AssistantMessage(content="x", tool_calls=(ToolCall(id="c1", name="t", arguments="{}"),)),
        ToolMessage(tool_call_id="c1", content="ok"), AssistantMessage(content="done")])
    return (serialize_loop_checkpoint(cp),)


_SKILL_SEEDS = (
    b"---\nname: deploy\ndescription: Deploy the app\nlicense: MIT\n---\n\n# Deploy\n\nSteps.\n",
    b"---\ndescription: Use when: the user asks\nwhen-to-use: always\n---\n## Title ##\nbody",
)
_SCHEMA_SEEDS = (
    b'{"type":"object","properties":{"a":{"type":"array","items":{"$ref":"#"}},'
    b'"b":{"anyOf":[{"type":"string"},{"type":"null"}]},"c":{"enum":[1,2],"default":1}},'
    b'"required":["a"],"$defs":{"n":{"type":"object","properties":{"x":{"$ref":"#/$defs/n"}}}}}',
    b'{"type":"object","properties":{"t":{"type":"array","prefixItems":[{"type":"integer"},'
    b'{"type":"string"}],"items":false},"o":{"type":["object","null"],"additionalProperties":'
    b'{"type":"number","minimum":0}}}}',
)
_JSON_SEEDS = (b'{"a": [1, 2.5, -0, "x\\u00e9\\ud83d\\ude00", true, null], "b": {"c": {}}}',)


def targets() -> list[Target]:
    out: list[Target] = []
    sse_seeds: list[bytes] = []
    for wire, adapter in WIRES.items():
        bodies = tuple(p.read_bytes() for p in _files(wire, ".json") if not p.name.startswith("err"))
        errors = tuple(p.read_bytes() for p in _files(wire, ".json") if p.name.startswith("err"))
        streams = tuple(p.read_bytes() for p in _files(wire, ".sse"))
        sse_seeds += streams[:4]
        out.append(Target(f"{wire}.parse_response", lambda b, a=adapter: a().parse_response(b),
                          (WireDecodeError, ProviderHttpError, ToolCallDeltaError),
                          bodies or (b"{}",)))
        out.append(Target(f"{wire}.stream_decoder", _stream(adapter),
                          (WireDecodeError, IncompleteStreamError, SseError, ProviderHttpError,
                           ToolCallDeltaError),
                          streams or (b"data: {}\n\n",)))
        out.append(Target(f"{wire}.classify_error", _classify(adapter), (),
                          errors or (b'{"error":{}}',)))
    out += [
        Target("sse_decoder", _sse, (SseError,), tuple(sse_seeds) or (b"data: x\n\n",)),
        Target("parse_loop_checkpoint", _checkpoint, (CheckpointFormatError,), _checkpoint_seeds()),
        Target("parse_skill_markdown", _skill, (SkillFormatError,), _SKILL_SEEDS),
        Target("sanitize_tool_schema", _sanitize, (SchemaSanitizeError,), _SCHEMA_SEEDS),
        Target("tool_call_arguments", _arguments, (), _ARGUMENT_SEEDS + tuple(
            p.read_bytes() for w in WIRES for p in _files(w, ".json"))[:12]),
        Target("partial_json", _partial, (), _JSON_SEEDS + tuple(
            p.read_bytes() for w in WIRES for p in _files(w, ".json"))[:12]),
    ]
    return out


# ---- mutation ---------------------------------------------------------------------------------

_TOKENS = (b"{", b"}", b"[", b"]", b'"', b"\\", b":", b",", b"null", b"true", b"-", b"1e999",
           b"9" * 5000, b"\\ud800", b"\\udfff", b"\xed\xa0\x80", b"\xff", b"\x00", b"\r", b"\n\n",
           b"data: ", b"event: error\n", b"[DONE]", b"\xef\xbb\xbf", b"retry: 99999999999\n",
           b'"error"', b'"code": 429', b'"retryDelay": "1e308s"', b"# " + b" " * 3000 + b"x",
           # issue 23's shapes: streamed Gemini arguments, compaction iterations, opaque items
           b'"willContinue": true', b'"partialArgs": [{"jsonPath": "$.a[3].b", "stringValue": "x"}]',
           b'"jsonPath": "$[\'a\']"', b'"iterations": [{"type": "compaction"}]',
           b'"type": "tool_search_call"', b'"arguments": {"q": 1}', b'"delta": {"stdout": ""}',
           b'"content": [{"type": "tool_use", "id": "t", "name": "n", "input": {}}]')


def _json_mutate(value: Any, rng: random.Random, depth: int = 0) -> Any:
    """Replace one value somewhere in a decoded JSON document with a hostile one."""
    if isinstance(value, dict) and value and depth < 12 and rng.random() < 0.8:
        key = rng.choice(list(value))
        out = dict(value)
        if rng.random() < 0.1:
            del out[key]
        else:
            out[key] = _json_mutate(value[key], rng, depth + 1)
        return out
    if isinstance(value, list) and value and depth < 12 and rng.random() < 0.8:
        i = rng.randrange(len(value))
        return value[:i] + [_json_mutate(value[i], rng, depth + 1)] + value[i + 1:]
    return rng.choice((
        None, True, 0, -1, 2**64, 10**400, 1.5e308, "", "x" * rng.randint(1, 300), "\ud800",
        [], {}, [[[[[]]]]], {"a": {"b": {"c": None}}}, "NaN", rng.randint(-9, 10**6),
        {"type": "object"}, [value, value], value if isinstance(value, str) else "s",
    ))


def _reencode(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass")


def mutate(seed: bytes, pool: tuple[bytes, ...], rng: random.Random) -> bytes:
    kind = rng.randrange(9)
    data = bytearray(seed)
    if kind == 0 and data:  # flip bytes
        for _ in range(rng.randint(1, 8)):
            data[rng.randrange(len(data))] = rng.randrange(256)
    elif kind == 1:  # insert a token
        at = rng.randint(0, len(data))
        data[at:at] = rng.choice(_TOKENS)
    elif kind == 2 and data:  # truncate
        del data[rng.randint(0, len(data) - 1):]
    elif kind == 3 and data:  # duplicate a slice
        a = rng.randrange(len(data))
        b = min(len(data), a + rng.randint(1, 200))
        data[b:b] = data[a:b] * rng.randint(1, 20)
    elif kind == 4:  # splice with another seed
        other = rng.choice(pool)
        data = data[:rng.randint(0, len(data))] + other[rng.randint(0, len(other)):]
    elif kind in (5, 6):  # structure-aware: mutate a decoded JSON value (a body, or an SSE event)
        lines = bytes(data).split(b"\n")
        spots = [i for i, line in enumerate(lines) if line.startswith(b"data: {")]
        try:
            if spots:
                i = rng.choice(spots)
                lines[i] = b"data: " + _reencode(_json_mutate(json.loads(lines[i][6:]), rng))
                data = bytearray(b"\n".join(lines))
            else:
                data = bytearray(_reencode(_json_mutate(json.loads(data), rng)))
        except (ValueError, RecursionError):
            data[rng.randint(0, len(data)):0] = rng.choice(_TOKENS)
    elif kind == 7:  # nesting
        n = rng.choice((10, 100, 1000, 5000))
        at = rng.randint(0, len(data))
        data[at:at] = b"[" * n if rng.random() < 0.5 else b'{"a":' * n
    else:  # generated from scratch
        data = bytearray(rng.randbytes(rng.randint(0, 64)))
    return bytes(data[:1 << 21])


# ---- the giants -------------------------------------------------------------------------------

def deep_inputs() -> dict[str, bytes]:
    """100,000-deep nesting, shaped for each kind of target."""
    arrays = b"[" * DEEP + b"]" * DEEP
    objects = b'{"a":' * DEEP + b"1" + b"}" * DEEP
    return {"arrays": arrays, "objects": objects,
            "sse": b"data: " + arrays + b"\n\n" + b"data: " + objects + b"\n\n"}
