"""Checkpoints: settled loop positions as versioned JSON, resumed with a reply, a wake or new input,
and forked into independent executions. See docs/checkpoints.md."""

from ._build import (
    create_loop_checkpoint as create_loop_checkpoint,
    fork_loop_checkpoint as fork_loop_checkpoint,
)
from ._codec import (
    parse_loop_checkpoint as parse_loop_checkpoint,
    serialize_loop_checkpoint as serialize_loop_checkpoint,
    validate_loop_checkpoint as validate_loop_checkpoint,
)
from ._driver import (
    CheckpointRunResult as CheckpointRunResult,
    CommitFn as CommitFn,
    RestoredLoop as RestoredLoop,
    RestoreFn as RestoreFn,
    loop_state_from_checkpoint as loop_state_from_checkpoint,
    run_from_checkpoint as run_from_checkpoint,
)
from ._errors import (
    CheckpointFormatError as CheckpointFormatError,
    CheckpointInputError as CheckpointInputError,
    UnsupportedCheckpointVersionError as UnsupportedCheckpointVersionError,
)
from ._input import (
    CheckpointInput as CheckpointInput,
    CheckpointReply as CheckpointReply,
    CheckpointWake as CheckpointWake,
    apply_checkpoint_input as apply_checkpoint_input,
)
from ._schema import (
    CHECKPOINT_VERSION as CHECKPOINT_VERSION,
    CheckpointLineage as CheckpointLineage,
    CheckpointStatus as CheckpointStatus,
    LoopBindings as LoopBindings,
    LoopCheckpoint as LoopCheckpoint,
    ReaskRecord as ReaskRecord,
)
from ._schema import (
    ApprovalRecord as ApprovalRecord,
    DecidedCall as DecidedCall,
)

__all__ = (
    "CHECKPOINT_VERSION",
    "CheckpointFormatError",
    "CheckpointInput",
    "CheckpointInputError",
    "CheckpointLineage",
    "CheckpointReply",
    "CheckpointRunResult",
    "CheckpointStatus",
    "CheckpointWake",
    "CommitFn",
    "LoopBindings",
    "LoopCheckpoint",
    "ReaskRecord",
    "RestoreFn",
    "RestoredLoop",
    "UnsupportedCheckpointVersionError",
    "apply_checkpoint_input",
    "create_loop_checkpoint",
    "fork_loop_checkpoint",
    "loop_state_from_checkpoint",
    "parse_loop_checkpoint",
    "run_from_checkpoint",
    "serialize_loop_checkpoint",
    "validate_loop_checkpoint",
    "ApprovalRecord",
    "DecidedCall",
)

from .._public import publish as _publish

_publish(__name__, globals(), __all__)
