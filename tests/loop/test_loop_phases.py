"""The machine's phases: the successor table as data, the absorbing ERROR phase, and the state
diagram in docs/loop.md drawn from the table.

Run ``python tests/loop/test_loop_phases.py`` to redraw the diagram in docs/loop.md after changing
the table; :func:`test_docs_draw_the_successor_table` fails until then.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings, strategies as st

from bindloop.contracts import ModelTurnResult, ToolCall, ToolError, ToolResult, UserMessage
from bindloop.errors import PortContractError, ProtocolError
from bindloop.loop import StepSettlement, ToolLoopState
from bindloop.lowlevel import (
    REQUEST_PHASES, START_SUCCESSORS, SUCCESSORS, WIRABLE, BatchFinished, BatchPlanned,
    BatchWrapped, BoundaryChecked, BoundaryDecided, CallModel, CheckBoundary, CheckFinal,
    Compacted, FinalChecked, Finish, LoopMachine, ModelReplied, Nudged, Phase, PlanBatch, RanCall,
    RunTool, Settled, ToolMessageAccepted, ToolNotRun, ToolRaised, ToolReturned,
)

DOC = Path(__file__).resolve().parents[2] / "docs" / "loop.md"
BEGIN = "<!-- state diagram: drawn from bindloop.lowlevel.SUCCESSORS by tests/loop/test_loop_phases.py -->"
END = "<!-- end of state diagram -->"


def render_state_diagram() -> str:
    """A Mermaid state diagram of :data:`SUCCESSORS` (edges labelled by answer type)."""
    lines = ["```mermaid", "stateDiagram-v2"]
    for phase in sorted(START_SUCCESSORS, key=list(Phase).index):
        lines.append(f"    [*] --> {phase.value}: start()")
    edges: dict[tuple[Phase, Phase], list[str]] = {}
    for (phase, answer), successors in SUCCESSORS.items():
        for after in sorted(successors, key=list(Phase).index):
            edges.setdefault((phase, after), []).append(answer.__name__)
    order = list(Phase).index
    for (phase, after), answers in sorted(edges.items(), key=lambda e: (order(e[0][0]),
                                                                       order(e[0][1]))):
        lines.append(f"    {phase.value} --> {after.value}: {' / '.join(answers)}")
    lines.append(f"    {Phase.DONE.value} --> [*]")
    lines.append(f"    note right of {Phase.ERROR.value}: any raise inside send(), from every "
                 "phase; absorbing")
    lines.append("```")
    return "\n".join(lines)


def _documented() -> str:
    text = DOC.read_text()
    return text.split(BEGIN, 1)[1].split(END, 1)[0].strip()


def test_docs_draw_the_successor_table() -> None:
    assert _documented() == render_state_diagram(), (
        "docs/loop.md's state diagram is not the table's: run python tests/loop/test_loop_phases.py")


# ---- ERROR ---------------------------------------------------------------------------------------

def started(*wired: str) -> LoopMachine:
    m = LoopMachine(ToolLoopState(messages=[UserMessage(content="go")]), 3,
                    wired=frozenset(wired))
    m.start()
    assert isinstance(m.next_effect(), CheckBoundary)
    m.send(BoundaryChecked(False))
    assert isinstance(m.next_effect(), CallModel)
    return m


def assert_absorbing(m: LoopMachine, named: str) -> None:
    assert m.phase is Phase.ERROR and m.pending is None
    for attempt in (m.next_effect, lambda: m.send(BoundaryChecked(False)), m.start,
                    lambda: m.send(ModelReplied(ModelTurnResult(), 1.0))):
        with pytest.raises(ProtocolError, match="error phase after " + named):
            attempt()
    assert m.phase is Phase.ERROR


def test_a_bad_port_answer_moves_the_machine_to_error_not_to_a_wedge() -> None:
    m = started()
    with pytest.raises(PortContractError, match="call_model returned str"):
        m.send(ModelReplied(result="not a turn", ms=1.0))  # type: ignore[arg-type]
    assert_absorbing(m, "PortContractError: call_model returned str")


def test_a_host_decision_that_is_not_a_bool_moves_the_machine_to_error() -> None:
    m = started("runs_serially")
    m.send(ModelReplied(ModelTurnResult(tool_calls=(ToolCall(id="a", name="x"),)), 1.0))
    assert isinstance(m.next_effect(), PlanBatch)
    with pytest.raises(PortContractError, match="runs_serially must return a bool, got str"):
        m.send(BatchPlanned(["yes"]))  # type: ignore[list-item]
    assert_absorbing(m, "PortContractError: runs_serially must return a bool")

    m = started("is_final_call")
    m.send(ModelReplied(ModelTurnResult(tool_calls=(ToolCall(id="a", name="x"),)), 1.0))
    assert isinstance(m.next_effect(), RunTool)
    m.send(ToolReturned(0, ToolResult(content="ok"), 1.0))
    assert isinstance(m.next_effect(), CheckFinal)
    with pytest.raises(ProtocolError, match="FinalChecked has 2 answers for 1 calls"):
        m.send(FinalChecked([True, True]))
    assert_absorbing(m, "ProtocolError: FinalChecked has 2 answers")


def test_a_raise_that_is_not_data_moves_the_machine_to_error_without_its_message() -> None:
    m = started()
    m.send(ModelReplied(ModelTurnResult(tool_calls=(ToolCall(id="a", name="x"),)), 1.0))
    assert isinstance(m.next_effect(), RunTool)
    with pytest.raises(PortContractError, match="carries KeyError; expected the ToolError"):
        m.send(ToolRaised(0, KeyError("password=hunter2"), "KeyError"))  # type: ignore[arg-type]
    assert m.failure is not None and "hunter2" not in m.failure
    assert_absorbing(m, "PortContractError: ToolRaised for call 'a' carries KeyError")


def test_a_refused_answer_and_an_answer_after_done_move_the_machine_to_error() -> None:
    m = started()
    with pytest.raises(ProtocolError, match="does not answer CallModel"):
        m.send(Nudged(None))
    assert_absorbing(m, "ProtocolError: Nudged does not answer CallModel")
    m = LoopMachine(ToolLoopState(), 0)
    m.start()
    m.next_effect()
    m.send(BoundaryChecked(False))
    assert isinstance(m.next_effect(), Finish) and m.phase is Phase.DONE
    with pytest.raises(ProtocolError, match="nothing is pending"):
        m.send(BoundaryChecked(False))
    assert_absorbing(m, "ProtocolError: BoundaryChecked sent, but nothing is pending")


def test_wired_names_only_known_ports() -> None:
    from bindloop.errors import UsageError

    with pytest.raises(UsageError, match="activate_plugins"):
        LoopMachine(ToolLoopState(), 1, wired=frozenset({"activate_plugins"}))
    assert LoopMachine(ToolLoopState(), 1, wired=WIRABLE).wired == WIRABLE


# ---- random answer sequences ---------------------------------------------------------------------

_CALLS = (ToolCall(id="a", name="x"), ToolCall(id="b", name="y"))
_ANSWERS = st.sampled_from([
    BoundaryChecked(False), BoundaryChecked(True), Compacted(None, 1.0), BoundaryDecided(False),
    BoundaryDecided(True), ModelReplied(ModelTurnResult(text="hi"), 1.0),
    ModelReplied(ModelTurnResult(tool_calls=_CALLS[:1]), 1.0),
    ModelReplied(ModelTurnResult(tool_calls=_CALLS), 1.0),
    ModelReplied("not a turn", 1.0),  # type: ignore[arg-type]
    ToolReturned(0, ToolResult(content="ok"), 1.0), ToolReturned(1, ToolResult(content="ok"), 1.0),
    ToolReturned(0, "not an outcome", 1.0),  # type: ignore[arg-type]
    ToolRaised(0, ToolError(error="ValueError: the tool failed"), "ValueError", 1.0),
    ToolRaised(0, ValueError("boom"), "ValueError", 1.0),  # type: ignore[arg-type]
    ToolNotRun(0),
    BatchPlanned([True]), BatchPlanned([False, True]), BatchPlanned([False, False]),
    BatchPlanned(["no"]),  # type: ignore[list-item]
    FinalChecked([False]), FinalChecked([True]), FinalChecked([False, True]),
    FinalChecked([1]),  # type: ignore[list-item]
    BatchFinished([ToolReturned(0, ToolResult(content="ok")), ToolReturned(1, ToolResult(content="ok"))]),
    BatchFinished([ToolReturned(0, ToolResult(content="ok"))]),
    BatchWrapped([ToolResult(content="a"), ToolResult(content="b")],
                 [RanCall(_CALLS[0], ToolReturned(0, ToolResult(content="a")))]),
    BatchWrapped([ToolResult(content="a")], []), BatchWrapped("nope", []),
    ToolMessageAccepted(), Settled(None), Settled(StepSettlement(stop=True)),
    Settled(StepSettlement(messages=(UserMessage(content="more"),))),
    Settled("not a settlement"),  # type: ignore[arg-type]
    Nudged(None), Nudged([UserMessage(content="go on")]), Nudged("nope"),  # type: ignore[arg-type]
])


@settings(max_examples=300, deadline=None)
@given(st.frozensets(st.sampled_from(sorted(WIRABLE))),
       st.lists(st.tuples(st.booleans(), _ANSWERS), max_size=40))
def test_random_answer_sequences_never_wedge_and_error_absorbs(
        wired: frozenset[str], steps: list[tuple[bool, Any]]) -> None:
    m = LoopMachine(ToolLoopState(messages=[UserMessage(content="go")]), 4, wired=wired)
    m.start()
    failure: str | None = None
    for pop, answer in steps:
        before = m.phase
        # Never wedged: there is an effect to pop, a request to answer in its own phase, or the
        # machine has ended (DONE) or failed (ERROR).
        queued = bool(m._effects)
        assert (queued or before in (Phase.DONE, Phase.ERROR)
                or (m.pending is not None and REQUEST_PHASES[type(m.pending)] is before))
        if pop:
            try:
                effect = m.next_effect()
            except ProtocolError as exc:
                assert not queued
                if failure is not None:
                    assert f"error phase after {failure}" in str(exc)
                continue
            assert failure is None and not isinstance(effect, BaseException)
            continue
        try:
            m.send(answer)
        except ProtocolError as exc:
            if failure is not None:
                assert f"error phase after {failure}" in str(exc)
            failure = failure or m.failure
        except Exception:
            assert failure is None, "ERROR answered with something but a ProtocolError"
            failure = m.failure
        else:
            assert failure is None, "ERROR accepted an answer"
            assert m.phase in SUCCESSORS[(before, type(answer))]
            continue
        assert m.phase is Phase.ERROR and failure is not None


if __name__ == "__main__":
    text = DOC.read_text()
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    DOC.write_text(f"{head}{BEGIN}\n{render_state_diagram()}\n{END}{tail}")
    sys.stdout.write("docs/loop.md: state diagram redrawn\n")
