"""LoopCheckpoint.reask: a typed, optional field that is never written when unset (so a checkpoint
without one keeps the bytes it always had) and round-trips when set."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from bindloop.contracts import UserMessage
from bindloop.checkpoints import (
    CheckpointFormatError,
    LoopCheckpoint,
    ReaskRecord,
    create_loop_checkpoint,
    parse_loop_checkpoint,
    serialize_loop_checkpoint,
)


def _base() -> LoopCheckpoint:
    return create_loop_checkpoint(execution_id="e", messages=[UserMessage(content="hi")],
                                  max_iterations=4)


def test_unset_is_not_written() -> None:
    data = serialize_loop_checkpoint(_base())
    assert b"reask" not in data
    assert parse_loop_checkpoint(data).reask is msgspec.UNSET


@given(attempts=st.lists(st.tuples(st.text(max_size=5), st.text(max_size=5)), max_size=3),
       steps=st.integers(1, 20), total=st.integers(0, 50))
def test_a_record_round_trips(attempts: list[tuple[str, str]], steps: int, total: int) -> None:
    record = ReaskRecord(attempts=tuple(attempts), attempt_turns=0, max_turn_steps=steps,
                         turns_left=total)
    cp = msgspec.structs.replace(_base(), reask=record)
    back = parse_loop_checkpoint(serialize_loop_checkpoint(cp))
    assert back == cp and back.reask == record


@pytest.mark.parametrize(("field", "value"), [("attempt_turns", 3), ("max_turn_steps", 0),
                                               ("turns_left", -1)])
def test_an_impossible_record_is_refused_by_name(field: str, value: int) -> None:
    raw = msgspec.to_builtins(msgspec.structs.replace(_base(), reask=ReaskRecord(
        max_turn_steps=2, turns_left=4)))
    raw["reask"][field] = value
    with pytest.raises(CheckpointFormatError, match=f"reask.{field}"):
        parse_loop_checkpoint(raw)
