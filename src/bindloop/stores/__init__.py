"""Stores: every port where a host keeps state between calls, runs or processes, each with its
in-memory version (``Memory`` + the port's name), and the stores' errors.

- :class:`CheckpointStore` / :class:`MemoryCheckpointStore` — the latest checkpoint of each
  execution, fenced on the revision (:class:`CheckpointConflictError`);
- :class:`ToolCallReceiptStore` / :class:`MemoryToolCallReceiptStore` — idempotency receipts of
  tool calls, fenced on the attempt;
- :class:`LimitStore` / :class:`MemoryLimitStore` — the rate limits' windows and concurrency slots;
- :class:`TokenStore`, :class:`SwapTokenStore` / :class:`MemoryTokenStore` — an MCP client's OAuth
  tokens and registration (:class:`OAuthTokens`, :class:`OAuthClientInfo`);
- :class:`RunLogs` / :class:`MemoryRunLogs` — each protocol run's event log and lease
  (:class:`RunRecord`, :class:`RunStatus`; :class:`RunBusyError`, :class:`RunsFullError`);
- :class:`PendingApprovals` / :class:`MemoryPendingApprovals` — the calls a chat server waits to
  have approved.

:class:`StoreError` is what a backend raises when an operation fails. The backends with I/O
(SQLite, Postgres, Redis, Durable Objects) are in ``bindloop.hosts``; ``bindloop.testing.store_kit``
is the conformance suite every store passes.
"""

from ._approvals import (
    MemoryPendingApprovals as MemoryPendingApprovals,
    PendingApprovals as PendingApprovals,
)
from ._checkpoints import (
    CheckpointStore as CheckpointStore,
    MemoryCheckpointStore as MemoryCheckpointStore,
)
from ._errors import (
    CheckpointConflictError as CheckpointConflictError,
    RunBusyError as RunBusyError,
    RunsFullError as RunsFullError,
    StoreError as StoreError,
)
from ._limits import LimitStore as LimitStore, MemoryLimitStore as MemoryLimitStore
from ._receipts import (
    MemoryToolCallReceiptStore as MemoryToolCallReceiptStore,
    ToolCallReceiptStore as ToolCallReceiptStore,
)
from ._run_logs import (
    MemoryRunLogs as MemoryRunLogs,
    RunLogs as RunLogs,
    RunRecord as RunRecord,
    RunStatus as RunStatus,
)
from ._tokens import (
    MemoryTokenStore as MemoryTokenStore,
    OAuthClientInfo as OAuthClientInfo,
    OAuthTokens as OAuthTokens,
    SwapTokenStore as SwapTokenStore,
    TokenStore as TokenStore,
)

__all__ = (
    "CheckpointConflictError",
    "CheckpointStore",
    "LimitStore",
    "MemoryCheckpointStore",
    "MemoryLimitStore",
    "MemoryPendingApprovals",
    "MemoryRunLogs",
    "MemoryTokenStore",
    "MemoryToolCallReceiptStore",
    "OAuthClientInfo",
    "OAuthTokens",
    "PendingApprovals",
    "RunBusyError",
    "RunLogs",
    "RunRecord",
    "RunStatus",
    "RunsFullError",
    "StoreError",
    "SwapTokenStore",
    "TokenStore",
    "ToolCallReceiptStore",
)

from .._public import publish as _publish

_publish(__name__, globals(), __all__)
