"""The stores' typed errors: a backend that failed an operation, a checkpoint write the revision
fence refuses, and a run log that refuses a new run."""

from __future__ import annotations

from ..errors import InfrastructureError, RunStoppedError, UsageError

__all__ = ("CheckpointConflictError", "RunBusyError", "RunsFullError", "StoreError")


class CheckpointConflictError(UsageError):
    """A checkpoint at ``revision`` of ``execution_id`` cannot land over the stored revision
    ``stored`` (it needs ``revision - 1`` stored). ``case`` says which mistake it is:

    - ``"another_conversation"``: ``revision`` is 0, the first checkpoint of a new execution, yet
      the id is already stored — two conversations were given the same ``execution_id`` (give
      each its own: ``create_agent(execution_ids=...)``);
    - ``"another_writer"``: two processes resumed the same execution and the other committed
      first. Stop this invocation; the execution goes on from the stored checkpoint, in whichever
      process owns it."""

    def __init__(self, execution_id: str, revision: int, stored: int) -> None:
        if revision == 0:
            self.case = "another_conversation"
            why = ("revision 0 starts a new execution, so another conversation already uses this "
                   "execution_id (give each conversation its own id)")
        else:
            self.case = "another_writer"
            why = "another writer committed first (single-writer fence)"
        super().__init__(
            f"checkpoint {execution_id!r} revision {revision} does not follow the stored revision "
            f"{stored}: {why}")
        self.execution_id = execution_id
        self.revision = revision
        self.stored = stored


class StoreError(InfrastructureError):
    """A storage backend failed an operation: ``store`` names the backend (``"postgres"``,
    ``"redis"``...), ``operation`` the call (``"save"``, ``"claim"``...). Whether the write landed
    is unknown unless the message says so; every write the stores ship is one transaction or one
    atomic script, so a checkpoint is either wholly stored or not at all. Retrying is the caller's
    choice: a fenced write retried after an unknown outcome is refused, never doubled. Raised inside
    a tool (a receipt's claim or completion), it ends the run by default: see
    :class:`~bindloop.errors.InfrastructureError`."""

    def __init__(self, store: str, operation: str, problem: str) -> None:
        super().__init__(f"{store} store: {operation} failed: {problem}")
        self.store = store
        self.operation = operation
        self.problem = problem


class RunBusyError(UsageError):
    """The chat's latest run still holds a live lease (``run_id``), in this process or another:
    a :class:`~bindloop.stores.RunLogs` refuses a second run of the chat until it ends or its
    lease runs out."""

    def __init__(self, run_id: str) -> None:
        super().__init__(f"run {run_id!r} of this chat is still running")
        self.run_id = run_id


class RunsFullError(RunStoppedError):
    """The logs hold as many running runs as they may keep: a new run is refused rather than a
    running one dropped (``running``: how many are running)."""

    def __init__(self, running: int) -> None:
        super().__init__(f"{running} runs are running: no room for another")
        self.running = running
