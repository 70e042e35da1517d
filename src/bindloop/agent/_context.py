"""Per-run and per-agent state, carried in one context variable (no globals).

A :class:`RunState` is one ``run_with`` (or one implicit run for an agent called outside it); a
:class:`Frame` is one agent invocation, holding its memory and its current :class:`Generation`
(the draft its hooks fill). The variable is set and reset in the calling task, so the state follows
the code through ``await`` on asyncio, trio, Pyodide and workerd alike, and tasks a handler starts
inherit a copy.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from ..contracts import Message, RunStats
from ._errors import AfterPromptAgentError, NoAgentContextError
from ..signal import AbortSignal
from ._snapshot import Journal, PromptHashCache

if TYPE_CHECKING:
    from ._host import ConsumerHost
    from ._observe import ToolErrorHook
    from ._middleware import ToolCallLoopMiddleware, ToolMiddleware
    from ..checkpoints import LoopCheckpoint
    from ..model import Model
    from ._snapshot import ReplayCursor
    from ._stream import ConsumerTask, StreamConsumer, Watcher
    from ._trace import Tracer
    from ._turns import ToolChoicePolicy
    from ._tools import AgentTool

__all__ = (
    "Frame",
    "Generation",
    "RunState",
    "current_frame",
    "draft_generation",
    "optional_frame",
)


class RunState:
    """One root run: what ``run_with`` injected, shared by every agent on the chain."""

    __slots__ = ("background", "background_errors", "enable_snapshot", "model", "providers",
                 "on_tool_error", "prompt_hashes", "registry", "replay", "root", "session_id",
                 "signal", "trace_id", "tracer", "watch")

    def __init__(self, *, providers: dict[str, Any], model: Model | None,
                 registry: dict[str, Model], enable_snapshot: bool,
                 signal: AbortSignal | None, tracer: Tracer,
                 replay: ReplayCursor | None, session_id: str | None = None,
                 trace_id: str | None = None,
                 on_tool_error: ToolErrorHook | None = None) -> None:
        self.on_tool_error = on_tool_error
        self.session_id = session_id  # what a ToolContext reports (rejelly's metadata)
        self.trace_id = trace_id
        self.providers = providers
        self.model = model
        self.registry = registry
        self.enable_snapshot = enable_snapshot
        self.signal = signal
        self.tracer = tracer
        self.replay = replay
        # What its prompts' hashes (snapshots, traces, replays) share: see PromptHashCache.
        self.prompt_hashes = PromptHashCache()
        self.root = Frame(run=self, agent_id=None, parent=None, path=())
        # The run's root (run_with, or the outermost agent call of an implicit run) as the host
        # of the ``on_stream`` consumers past their prompt (see ``_host``), and what the
        # fire-and-forget ones raised (re-raised once the root is done).
        self.background: ConsumerHost | None = None
        self.background_errors: list[BaseException] = []
        # run_with(on_event=): the synchronous observer of the top-level agent's prompts.
        self.watch: Watcher | None = None


class Generation:
    """One execution of a handler: the draft its hooks fill before the prompt crosses the barrier."""

    __slots__ = ("approvals", "budget", "consumers", "history", "history_source", "index",
                 "instructions", "loop_middleware", "prompted", "serial", "stats", "streams",
                 "system", "tool_choice", "tools", "validators", "watchers")

    def __init__(self, index: int) -> None:
        self.index = index
        self.system: list[str] = []
        self.instructions: list[str] = []
        self.history: list[Message] = []
        # The stored checkpoint the history was read from (equip_history(source=)): the prompt's
        # first save checks only what is not its (validated) messages.
        self.history_source: LoopCheckpoint | None = None
        self.tools: list[tuple[AgentTool, tuple[ToolMiddleware, ...]]] = []
        self.serial: set[str] = set()  # names of equipped tools whose calls run alone, in order
        self.approvals: dict[str, Any] = {}  # tool name -> equip_tool(needs_approval=) rule
        self.loop_middleware: list[ToolCallLoopMiddleware] = []
        self.validators: list[Callable[[Any], object]] = []
        self.streams: list[StreamConsumer] = []
        self.watchers: list[Watcher] = []  # on_event observers, called as each event is emitted
        # The awaited stream consumers still running after the prompt (waited for at the close).
        self.consumers: list[ConsumerTask] = []
        self.stats: RunStats | None = None  # the prompt's, once it returned
        self.tool_choice: ToolChoicePolicy | None = None  # prompt_chat(tool_choice=)
        self.budget: int | None = None
        self.prompted = False


class Frame:
    """One agent invocation (or the root of a run, ``agent_id is None``).

    ``memory`` survives reborn and dies with the frame; ``memo`` / ``resources`` cache factory values
    per key with their deps; ``scope`` holds what :func:`equip_scope` offered sub-agents;
    ``children`` are the sub-agent frames in call order; ``journal`` records model responses and
    tool outputs for snapshots.
    """

    __slots__ = ("agent_id", "child_count", "children", "cursor", "generation", "journal", "max_retries", "memo",
                 "memory", "model", "parent", "path", "resources", "run", "scope", "signal",
                 "span", "specs", "spent", "new_execution_id")

    def __init__(self, *, run: RunState, agent_id: str | None, parent: Frame | None,
                 path: tuple[int, ...], model: Model | None = None,
                 signal: AbortSignal | None = None, max_retries: int = 3,
                 cursor: ReplayCursor | None = None,
                 specs: dict[Any, Any] | None = None,
                 new_execution_id: Callable[[], str] | None = None) -> None:
        self.run = run
        self.agent_id = agent_id
        self.parent = parent
        self.path = path
        self.model = model
        self.signal = signal
        self.memory: dict[str, Any] = {}
        self.memo: dict[str, tuple[Any, Any]] = {}
        self.resources: dict[str, tuple[Sequence[Any], Any]] = {}
        self.scope: dict[str, Any] = {}
        self.children: list[Frame] = []
        self.child_count = 0
        self.journal: Journal = Journal()
        self.generation: Generation | None = None
        self.span: str | None = None
        self.spent = 0  # the cost of this agent's turns and its sub-agents'
        self.max_retries = max_retries
        self.cursor = cursor
        self.specs: dict[Any, Any] = {} if specs is None else specs
        # The agent's id port: one fresh execution id per conversation (prompt) it starts.
        self.new_execution_id = new_execution_id


_FRAME: ContextVar[Frame | None] = ContextVar("bindloop_agent_frame", default=None)


def optional_frame() -> Frame | None:
    """The current frame (an agent's or a run's root), or ``None`` outside both."""
    return _FRAME.get()


def current_frame(hook: str) -> Frame:
    """The current agent's frame, or :class:`NoAgentContextError` naming ``hook``."""
    frame = _FRAME.get()
    if frame is None or frame.generation is None:
        raise NoAgentContextError(
            f"{hook}() was called outside an agent handler: call it inside the handler of an agent "
            "made by create_agent(...), while `await agent(props)` runs")
    return frame


def draft_generation(hook: str) -> tuple[Frame, Generation]:
    """The current frame and its generation for a draft hook: refused after the prompt barrier."""
    frame = current_frame(hook)
    generation = frame.generation
    assert generation is not None  # current_frame checked it
    if generation.prompted:
        raise AfterPromptAgentError(
            f"{hook}() was called after this generation's prompt_agent()/prompt_chat(): draft "
            f"hooks shape the prompt, so call {hook}() before the prompt (or return reborn() and "
            "call it in the next generation)")
    return frame, generation


def enter(frame: Frame) -> Any:
    """Make ``frame`` current; returns the token for :func:`leave`."""
    return _FRAME.set(frame)


def leave(token: Any) -> None:
    _FRAME.reset(token)
