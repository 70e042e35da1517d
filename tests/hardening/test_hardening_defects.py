"""Regression tests for issue 14's parser defects 8 (checkpoints), 9, 10, 12 and 13.

Each test is built from the hostile input the fuzz campaign found and asserts the documented
outcome: a typed error (or, for the never-raising partial JSON parser, an ``invalid`` state) within
a small time bound, and error messages that a UTF-8 log handler can write.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

import msgspec
import pytest
import yaml as pyyaml
from hypothesis import given, settings
from hypothesis import strategies as st

from bindloop.agent.partial_json import PartialJsonParser, parse_partial_json
from bindloop.contracts import AssistantMessage, UserMessage
from bindloop.errors import TranscriptFormatError
from bindloop.run import CanonicalJsonError, canonical_json
from bindloop.checkpoints import (
    CheckpointFormatError,
    LoopBindings,
    create_loop_checkpoint,
    parse_loop_checkpoint,
    serialize_loop_checkpoint,
)
from bindloop.skills import SkillFormatError, parse_skill_markdown
from bindloop.schema import sanitize_tool_schema
from bindloop.transcript import validate_and_heal_messages

LIMIT = sys.get_int_max_str_digits()
HUGE = "7" * (LIMIT + 700)


class Yaml:
    def parse(self, text: str) -> Any:
        return pyyaml.safe_load(text)

    def stringify(self, value: Any) -> str:
        return str(pyyaml.safe_dump(dict(value), sort_keys=False))


def encodable(exc: BaseException) -> str:
    text = str(exc)
    text.encode("utf-8")  # raises if a lone surrogate leaked into the message
    return text


def good_checkpoint() -> Any:
    return create_loop_checkpoint(execution_id="exec-1", messages=[UserMessage(content="hi")],
                                  max_iterations=4)


# ---- 8: deep nesting in a stored checkpoint ---------------------------------------------------

def test_deeply_nested_checkpoint_text_is_a_format_error() -> None:
    deep = "[" * 100_000 + "]" * 100_000
    with pytest.raises(CheckpointFormatError, match="nested too deeply"):
        parse_loop_checkpoint('{"version": 1, "messages": ' + deep + "}")
    with pytest.raises(CheckpointFormatError, match="nested too deeply"):
        parse_loop_checkpoint(('{"version": 1, "bindings": {"config": {"a": ' + deep + "}}}")
                              .encode())


def test_deeply_nested_checkpoint_dict_is_a_format_error() -> None:
    nested: list[Any] = []
    for _ in range(100_000):
        nested = [nested]
    doc = msgspec.to_builtins(good_checkpoint())
    doc["bindings"] = {"config": {"a": nested}, "environment": {}}
    with pytest.raises(CheckpointFormatError) as info:
        parse_loop_checkpoint(doc)
    assert info.value.field.startswith("bindings.config")
    with pytest.raises(CheckpointFormatError):
        create_loop_checkpoint(execution_id="e", messages=[], max_iterations=1,
                               bindings=LoopBindings(config={"a": nested}))


# ---- 9: integers past CPython's int-string limit --------------------------------------------

def test_partial_json_refuses_a_huge_integer_instead_of_raising() -> None:
    out = parse_partial_json(f'{{"n": {HUGE}}}')
    assert out.state == "invalid"
    assert out.value == {}
    assert "int conversion limit" in (out.error or "")
    # A top-level integer still open may yet become a float: a valid prefix, not a raise.
    assert parse_partial_json(HUGE).state == "partial"
    # json.loads reads a huge float as inf; so does the parser.
    assert parse_partial_json(f"[{HUGE}.5]").value == [float("inf")]
    assert parse_partial_json("7" * LIMIT).value == int("7" * LIMIT)


def test_partial_json_parser_fed_a_huge_integer_in_chunks_never_raises() -> None:
    parser = PartialJsonParser()
    text = f'[1, {HUGE}, 2]'
    results = [parser.feed(text[i:i + 97]) for i in range(0, len(text), 97)]
    assert results[-1].state == "invalid"
    assert results[-1].value == [1]


def test_canonical_json_refuses_a_huge_integer_with_its_error() -> None:
    with pytest.raises(CanonicalJsonError, match="about 5000 digits"):
        canonical_json({"n": 10**5000})
    with pytest.raises(CanonicalJsonError, match="unprintable"):
        canonical_json({10**5000: 1})


# ---- 10: SKILL.md parse time is linear ------------------------------------------------------

@pytest.mark.parametrize("spaces", [5_000, 200_000])
def test_heading_with_a_long_run_of_spaces_parses_fast(spaces: int) -> None:
    raw = "---\ndescription: does things\n---\n# a" + " " * spaces + "x\n\nbody\n"
    started = time.process_time()  # CPU time: a loaded machine does not count
    parsed = parse_skill_markdown(raw, yaml=Yaml())
    assert time.process_time() - started < 2.0
    assert parsed.skill.name == "a-x"


@pytest.mark.parametrize("line", [
    "description: use when: asked" + " " * 200_000,
    "description:" + " " * 200_000,
    "description: a: b" + " \t" * 100_000 + "\x0b",
])
def test_colon_repair_on_hostile_lines_is_fast(line: str) -> None:
    raw = "---\n" + line + "\nbroken: [\n---\nbody"
    started = time.process_time()  # CPU time: a loaded machine does not count
    with pytest.raises(SkillFormatError):
        parse_skill_markdown(raw, yaml=Yaml())
    assert time.process_time() - started < 2.0


def test_first_heading_rules() -> None:
    def name(body: str) -> str:
        return parse_skill_markdown("---\ndescription: d\n---\n" + body, yaml=Yaml()).skill.name

    assert name("text\n## Deploy Tools ##\n# later") == "deploy-tools"
    assert name("####### seven\n#nospace\n# C#") == "c"  # slug drops the '#'; not a closing run
    assert name("#\n# \n") == "d"  # empty headings are skipped; the description is the fallback


# ---- 12: lone surrogates --------------------------------------------------------------------

def test_checkpoint_dict_with_a_lone_surrogate_is_refused_at_parse() -> None:
    doc = msgspec.json.decode(serialize_loop_checkpoint(good_checkpoint()))
    doc["messages"][0]["content"] = "a\ud800b"
    with pytest.raises(CheckpointFormatError) as info:
        parse_loop_checkpoint(doc)
    assert info.value.field == "messages[0].content"
    encodable(info.value)


def test_create_checkpoint_with_a_lone_surrogate_is_refused() -> None:
    with pytest.raises(CheckpointFormatError) as info:
        create_loop_checkpoint(execution_id="e", messages=[UserMessage(content="x\udc00")],
                               max_iterations=2)
    assert info.value.field == "messages[0].content"
    with pytest.raises(CheckpointFormatError) as info:
        create_loop_checkpoint(execution_id="e", messages=[], max_iterations=2,
                               bindings=LoopBindings(config={"k\ud801": 1}))
    encodable(info.value)


def test_checkpoint_text_with_a_lone_surrogate_is_a_format_error() -> None:
    text = serialize_loop_checkpoint(good_checkpoint()).decode().replace("hi", "h\ud800")
    with pytest.raises(CheckpointFormatError, match="lone surrogate") as info:
        parse_loop_checkpoint(text)
    encodable(info.value)


def test_canonical_json_error_message_stays_encodable() -> None:
    with pytest.raises(CanonicalJsonError) as info:
        canonical_json({"k\ud800": 1})
    assert "\\ud800" in encodable(info.value)
    info.value.path.encode("utf-8")


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), min_size=1))
def test_surrogate_messages_always_encode(text: str) -> None:
    with pytest.raises(CanonicalJsonError) as info:
        canonical_json({text: text})
    encodable(info.value)
    with pytest.raises(CheckpointFormatError) as cp_info:
        create_loop_checkpoint(execution_id="e", messages=[], max_iterations=1,
                               bindings=LoopBindings(config={text: 1}))
    encodable(cp_info.value)


# ---- 13: the smaller ones -------------------------------------------------------------------

@pytest.mark.parametrize("value", ["abc", [1, 2], None, b"xy", [{"role": "user"}], 5])
def test_heal_refuses_what_is_not_a_transcript(value: Any) -> None:
    with pytest.raises(TranscriptFormatError):
        validate_and_heal_messages(value)


def test_heal_still_accepts_tuples_and_lists_of_messages() -> None:
    messages = (UserMessage(content="q"), AssistantMessage(content="a"))
    assert validate_and_heal_messages(messages, for_request=False).messages is messages


@pytest.mark.parametrize("schema", [
    {"$ref": "#"},
    {"type": "object", "properties": {"a": {"$ref": "#"}}},
    {"type": "object", "properties": {"a": {"type": "array", "items": {"$ref": "#"}}}},
    {"type": "object", "properties": {"a": {"$ref": "#/$defs/n"}},
     "$defs": {"n": {"type": "array", "items": {"$ref": "#/$defs/n"}}}},
])
def test_recursive_refs_are_cut_and_the_result_is_a_fixpoint(schema: dict[str, Any]) -> None:
    once = sanitize_tool_schema(schema)
    twice = sanitize_tool_schema(once)
    assert json.dumps(once) == json.dumps(twice)
    assert "repeats the enclosing one" in json.dumps(once)


def test_items_self_reference_is_cut_like_defs_recursion() -> None:
    out = sanitize_tool_schema(
        {"type": "object", "properties": {"a": {"type": "array", "items": {"$ref": "#"}}}})
    inner = out["properties"]["a"]["items"]
    assert inner["type"] == "object"
    assert inner["properties"]["a"]["type"] == "array"


def test_checkpoint_size_limit_is_the_hosts() -> None:
    data = serialize_loop_checkpoint(good_checkpoint())
    with pytest.raises(CheckpointFormatError, match="max_bytes"):
        parse_loop_checkpoint(data, max_bytes=len(data) - 1)
    assert parse_loop_checkpoint(data, max_bytes=len(data)).execution_id == "exec-1"
    with pytest.raises(Exception, match="max_bytes"):
        parse_loop_checkpoint(data, max_bytes=0)


@pytest.mark.parametrize("front", [
    "description: " + "[" * 60_000,
    "description: " + "{a: " * 5_000,
    "description: d\nextra: " + "x" * 70_000,
])
def test_hostile_frontmatter_fails_fast_before_the_yaml_port(front: str) -> None:
    class Watching(Yaml):
        calls = 0

        def parse(self, text: str) -> Any:
            Watching.calls += 1
            return super().parse(text)

    started = time.process_time()  # CPU time: a loaded machine does not count
    with pytest.raises(SkillFormatError, match="max_frontmatter_chars|nests brackets"):
        parse_skill_markdown("---\n" + front + "\n---\nbody", yaml=Watching())
    assert time.process_time() - started < 2.0
    assert Watching.calls == 0


def test_ordinary_flow_collections_still_parse() -> None:
    parsed = parse_skill_markdown(
        "---\ndescription: d\nallowed-tools: [read, {name: write, modes: [a, b]}]\n---\n",
        yaml=Yaml())
    assert parsed.extra["allowed-tools"] == ["read", {"name": "write", "modes": ["a", "b"]}]
