"""Snapshots of a whole run: every frame's memory and a journal of model responses and tool
outputs, with stable bytes (:func:`encode_snapshot` / :func:`parse_snapshot`).

:func:`dump_snapshot` takes one from a run started with ``run_with(enable_snapshot=True)``
(otherwise :class:`SnapshotDisabledError`); :func:`restore_snapshot` rebuilds one from a run's
trace. ``run_with(snapshot=)`` replays one, serving the journal (zero model calls, zero tool runs)
until it runs out; a request the journal did not record raises :class:`SnapshotDivergenceError`.
See docs/agent.md.
"""

from ._snapshot import (
    SNAPSHOT_VERSION as SNAPSHOT_VERSION,
    AgentSnapshot as AgentSnapshot,
    FrameSnapshot as FrameSnapshot,
    JournalTurn as JournalTurn,
    encode_snapshot as encode_snapshot,
    parse_snapshot as parse_snapshot,
)
from ._run import (
    dump_snapshot as dump_snapshot,
    restore_snapshot as restore_snapshot,
)
from ._errors import (
    SnapshotDisabledError as SnapshotDisabledError,
    SnapshotDivergenceError as SnapshotDivergenceError,
)

__all__ = (
    "SNAPSHOT_VERSION",
    "AgentSnapshot",
    "FrameSnapshot",
    "JournalTurn",
    "SnapshotDisabledError",
    "SnapshotDivergenceError",
    "dump_snapshot",
    "encode_snapshot",
    "parse_snapshot",
    "restore_snapshot",
)

from .._public import publish as _publish

_publish(__name__, globals(), __all__)
