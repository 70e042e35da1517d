"""Checkpointed scenarios: the loop run through ``bindloop.checkpoints``, stopped at a committed
checkpoint and resumed from the checkpoint the scenario stores (the bytes CPython wrote), so a
Pyodide run resumes what CPython checkpointed and both reports carry the bytes each one wrote."""

from __future__ import annotations

from typing import Any, cast

import msgspec

from bindloop import BoundaryDecision, ToolLoopParams, ToolLoopPorts, ToolLoopResult, ToolLoopState
from bindloop.checkpoints import (
    LoopBindings,
    LoopCheckpoint,
    RestoredLoop,
    create_loop_checkpoint,
    loop_state_from_checkpoint,
    parse_loop_checkpoint,
    run_from_checkpoint,
    serialize_loop_checkpoint,
)

from ._schema import CheckpointSpec

__all__ = ("run_checkpointed",)

# Every port (all ToolLoopParams fields but state and max_iterations, which the checkpoint holds).
_PORTS = ToolLoopPorts.__struct_fields__


async def run_checkpointed(spec: CheckpointSpec, params: ToolLoopParams) -> tuple[
        ToolLoopResult, ToolLoopState, dict[str, Any], list[dict[str, Any]]]:
    """Both legs. Returns the final stop reason with the *cumulative* stats, the final state, the
    report's ``checkpoint`` entry (leg 1's stop reason and the bytes it wrote) and mismatches."""
    bindings = LoopBindings(config=spec.config, environment=spec.environment)
    first = create_loop_checkpoint(execution_id=spec.execution_id, messages=params.state.messages,
                                   max_iterations=params.max_iterations, bindings=bindings)
    restored = RestoredLoop(capture_bindings=lambda: bindings,
                            **{name: getattr(params, name) for name in _PORTS})
    written: list[bytes] = []

    def stop_there(cp: LoopCheckpoint) -> BoundaryDecision:
        written.append(serialize_loop_checkpoint(cp))
        return "checkpoint" if cp.iterations == spec.stop_at_iterations else "continue"

    leg1 = await run_from_checkpoint(checkpoint=first, restore=lambda cp: restored,
                                     commit=stop_there)
    saved = written[-1].decode() if written else ""
    mismatches: list[dict[str, Any]] = []
    if leg1.stop_reason != "checkpointed":
        mismatches.append({"at": "checkpoint.stopped", "expected": "checkpointed",
                           "observed": leg1.stop_reason})
    stored = parse_loop_checkpoint(spec.stored)
    if saved != serialize_loop_checkpoint(stored).decode():
        mismatches.append({"at": "checkpoint.stored", "expected": spec.stored,
                           "observed": msgspec.json.decode(saved) if saved else None})
    leg2 = await run_from_checkpoint(checkpoint=stored, restore=lambda cp: restored,
                                     commit=lambda cp: "continue")
    result = ToolLoopResult(stop_reason=cast(Any, leg2.stop_reason), stats=leg2.cumulative_stats)
    entry = {"stopped": leg1.stop_reason, "saved": saved, "resumed_iterations": leg2.iterations}
    return result, loop_state_from_checkpoint(leg2.checkpoint), entry, mismatches
