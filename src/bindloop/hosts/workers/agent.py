"""The agent a Worker runs, with no Workers API in it (importable and tested on CPython): providers
from the Worker's env, the route plan, and :func:`run_session`, which runs one stored checkpoint
with the Worker's tools through bindloop's agent API (``create_agent`` + ``prompt_chat`` for a new
message, ``resume_chat`` after a reply) until it settles.

Everything Workers-specific (requests, the Durable Objects, the SSE stream, ``fetch``) stays in
``app.py``, ``sessions.py`` and ``frontends.py`` and reaches this module as plain values and
callables.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import msgspec

from bindloop.agent import (
    ChatResult,
    augment_model,
    create_agent,
    equip_history,
    equip_tool,
    on_event,
    prompt_chat,
    resume_chat,
)
from bindloop.agent.events import (
    AgentStreamEvent,
    ToolFinishedEvent,
    ToolStartedEvent,
)
from bindloop.agent.limits import create_simple_limit_middleware
from bindloop.hosts.chat.quota import DEFAULT_MAX_LOG_BYTES
from bindloop.stores import LimitStore
from bindloop.clock import Clock
from bindloop.textstream import TurnStreamEvent, TurnTextStream, create_turn_text_stream
from bindloop.wire import StreamBudgets
from bindloop.contracts import (
    AssistantMessage,
    StopReason,
    ToolMessage,
    accumulate_run,
)
from bindloop.loop import LoopCounters
from bindloop.model import Model
from bindloop.errors import ProviderError, UsageError
from bindloop.tools import Tool
from bindloop.routing import (
    AttemptError,
    OrderedPolicy,
    RouteCandidate,
    RoutePlan,
    RouteStage,
    canonical_model_id,
    provider_id,
)
from bindloop.checkpoints import LoopCheckpoint, validate_loop_checkpoint
from bindloop.wire import (
    WIRE_NAMES,
    ModelAdapter,
    RoutedModel,
    Transport,
    WireOptions,
    create_wire_adapter,
    fallback_route,
)

MAX_BODY_BYTES = 64 * 1024
"""Requests above this are refused with 413 before they are parsed."""

MAX_BODY_DEPTH = 32
"""Requests nested deeper than this are refused with 400 before they are parsed."""

BODY_TIMEOUT_S = 10.0
"""A request body that has not arrived whole in this time is refused with 408."""

DEFAULT_MAX_ITERATIONS = 8
DEFAULT_HEARTBEAT_MS = 15_000
"""An SSE comment this often while a run sends nothing (proxies drop idle streams at 30-100 s)."""
DEFAULT_LEASE_MS = 30_000
"""A run renews its lease every third of this; one not renewed for this long is lost."""
SESSION_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")

LOGGER = logging.getLogger("bindloop.hosts.workers")
"""Where a failed run's detail goes (ERROR, with the exception): the Worker's log (``workerd``'s
output, ``wrangler tail``). A client reads only a short category (:func:`error_event` on ``/v1``,
``bindloop.hosts.chat.errors.error_text`` with the run's id on the protocol routes)."""


class HttpError(Exception):
    """A request the Worker refuses: ``status`` (4xx), a stable ``code`` and a message naming the
    problem and the fix. Rendered as ``{"error": code, "message": ...}``."""

    def __init__(self, status: int, code: str, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.extra = extra

    def body(self) -> dict[str, Any]:
        return {"error": self.code, "message": self.message, **self.extra}


class Provider(msgspec.Struct, frozen=True, kw_only=True):
    """One provider endpoint. ``api_key`` comes from a Worker secret; it is never logged or echoed."""

    id: str
    base_url: str
    wire: str
    model: str
    api_key: str


ModelFor = Callable[[Any], Model]
"""A Worker's model from its env, built for each run: a function of the Worker's bindings (its
secrets and vars), e.g. ``lambda env: create_model("openai:gpt-4.1-mini", env=env)`` -- the key
the ``OPENAI_API_KEY`` secret, the endpoint moved by an ``OPENAI_BASE_URL`` var. It returns a
:class:`~bindloop.wire.ModelAdapter` or a :class:`~bindloop.wire.RoutedModel`
(``create_model(..., fallback=...)``): the Worker routes its calls itself, so the ``/v1`` stream's
turn events, a fallback's ``reset`` and the shared ``RATE_LIMIT_*`` hold for it as for the
``PROVIDER_*`` vars."""


def model_of(owner: Any) -> ModelFor | None:
    """The ``model`` a Worker's class declares (``app.ChatWorker``, ``app.Session``), read from
    the class, so a plain function assigned in its body is not bound as a method; ``None``: the
    ``PROVIDER_*`` vars configure the model."""
    model: ModelFor | None = getattr(type(owner), "model", None)
    return model


class AgentConfig(msgspec.Struct, frozen=True, kw_only=True):
    """``model``: the Worker's own model, built from its env (:data:`ModelFor`); ``None``:
    ``providers``, from the ``PROVIDER_*`` / ``FALLBACK_*`` vars. ``rate_limit_rpm`` / ``rate_limit_concurrency``: model calls per minute and in flight, shared
    by every isolate through the rate-limit store (``None``: no limit). ``budgets``: each model
    call's stall bounds (first token, between chunks, total). ``heartbeat_ms``: the SSE keep-alive
    comment interval (``None``: off). ``lease_ms``: how long a run's lease lives without a
    heartbeat before the run counts as lost. ``continue_after_ms``: how long a lost run waits,
    once the Session object noticed it, for a client to resume it before the object's alarm
    continues it itself (``0``: at once). ``approval_tools``: the tools whose calls wait for the
    user's approval on the frontend routes (``POST /api/chat``, ``POST /ag-ui``). ``tools``: the
    Worker's tools (its ``tools`` class attribute). ``max_live_runs``: runs one identity may have
    going at once, counted across isolates (``None``: no bound); ``max_live_runs_total``: runs
    of all identities together (``None``: no bound). ``chat_ttl_ms``: how long a chat's
    storage outlives its last run (``None``: kept until deleted). ``max_log_bytes``: the bytes of
    events one run logs before it is stopped with ``log_full``
    (:class:`~bindloop.hosts.chat.quota.LogQuota`)."""

    providers: tuple[Provider, ...] = ()
    model: ModelAdapter | RoutedModel | None = None
    max_iterations: int = DEFAULT_MAX_ITERATIONS
    system_prompt: str | None = None
    rate_limit_rpm: int | None = None
    rate_limit_concurrency: int | None = None
    budgets: StreamBudgets = StreamBudgets()
    heartbeat_ms: int | None = DEFAULT_HEARTBEAT_MS
    lease_ms: int = DEFAULT_LEASE_MS
    continue_after_ms: int = 0
    approval_tools: frozenset[str] = frozenset()
    tools: tuple[Tool[Any, Any], ...] = ()
    max_live_runs: int | None = None
    max_live_runs_total: int | None = None
    chat_ttl_ms: int | None = None
    max_log_bytes: int = DEFAULT_MAX_LOG_BYTES


def _setting(env: Any, name: str) -> str | None:
    value = getattr(env, name, None)
    if value is None:
        return None
    text = str(value)
    return text if text and text != "undefined" else None


def config_from_env(env: Any, tools: Sequence[Tool[Any, Any]] = (),
                    model: ModelFor | None = None) -> AgentConfig:
    """The model: ``model(env)`` when the Worker declares one (:data:`ModelFor`; what it raises
    -- a missing key, a malformed model string -- is a ``misconfigured`` 500 with its message,
    which never shows a key), else the ``PROVIDER_*`` (required) and ``FALLBACK_*`` (optional)
    vars: ``BASE_URL``, ``WIRE`` (one of bindloop's wire names), ``MODEL``, and the secret
    ``API_KEY`` (read only without ``model``; the ``STREAM_*`` budgets apply to these only: a
    ``model`` has ``create_model(budgets=...)``'s). ``MAX_ITERATIONS`` bounds a
    session's model turns; ``SYSTEM_PROMPT`` opens every new session; ``RATE_LIMIT_RPM`` and
    ``RATE_LIMIT_CONCURRENCY`` (optional) limit the model calls of every isolate together.
    ``RUN_LEASE_MS``, ``RUN_CONTINUE_MS``, ``APPROVAL_TOOLS`` (comma-separated tool names),
    ``MAX_LIVE_RUNS``, ``MAX_LIVE_RUNS_TOTAL``, ``CHAT_TTL_MS`` and ``MAX_LOG_BYTES`` (a positive
    integer; unset: 8 MiB) are :class:`AgentConfig`'s; ``tools`` are the Worker's (``APPROVAL_TOOLS`` must name some of
    them). A misconfigured Worker answers 500 naming the variable (never its
    value)."""
    providers: list[Provider] = []
    built = None if model is None else _built(model, env)
    for prefix, pid in () if built is not None else (("PROVIDER", "primary"),
                                                     ("FALLBACK", "fallback")):
        base_url = _setting(env, f"{prefix}_BASE_URL")
        if base_url is None:
            if prefix == "PROVIDER":
                raise HttpError(500, "misconfigured", "the Worker has no PROVIDER_BASE_URL var; set it "
                                "in wrangler.jsonc (vars) or the dashboard")
            continue
        wire = _setting(env, f"{prefix}_WIRE") or "openai_chat"
        if wire not in WIRE_NAMES:
            raise HttpError(500, "misconfigured", f"{prefix}_WIRE must be one of "
                            f"{', '.join(WIRE_NAMES)}, got {wire!r}")
        model_name = _setting(env, f"{prefix}_MODEL")
        if model_name is None:
            raise HttpError(500, "misconfigured", f"the Worker has no {prefix}_MODEL var")
        api_key = _setting(env, f"{prefix}_API_KEY")
        if api_key is None:
            raise HttpError(500, "misconfigured", f"the Worker has no {prefix}_API_KEY secret; add "
                            f"it with `uv run pywrangler secret put {prefix}_API_KEY`")
        providers.append(Provider(id=pid, base_url=base_url, wire=wire, model=model_name,
                                  api_key=api_key))
    max_iterations = _positive(env, "MAX_ITERATIONS")
    defaults = StreamBudgets()
    budgets = StreamBudgets(**{
        field: _budget(env, var, getattr(defaults, field)) for field, var in (
            ("first_token_ms", "STREAM_FIRST_TOKEN_MS"), ("inter_chunk_ms", "STREAM_INTER_CHUNK_MS"),
            ("total_ms", "STREAM_TOTAL_MS"))})
    heartbeat = _budget(env, "SSE_HEARTBEAT_MS", DEFAULT_HEARTBEAT_MS)
    lease = _positive(env, "RUN_LEASE_MS")
    continue_after = _budget(env, "RUN_CONTINUE_MS", None)
    approval = frozenset(n.strip() for n in (_setting(env, "APPROVAL_TOOLS") or "").split(",")
                         if n.strip())
    unknown = sorted(approval - {t.name for t in tools})
    if unknown:
        raise HttpError(500, "misconfigured", f"APPROVAL_TOOLS names {', '.join(unknown)}, not "
                        f"among the Worker's tools ({', '.join(t.name for t in tools)})")
    return AgentConfig(providers=tuple(providers), model=built,
                       max_iterations=DEFAULT_MAX_ITERATIONS if max_iterations is None else max_iterations,
                       system_prompt=_setting(env, "SYSTEM_PROMPT"),
                       rate_limit_rpm=_positive(env, "RATE_LIMIT_RPM"),
                       rate_limit_concurrency=_positive(env, "RATE_LIMIT_CONCURRENCY"),
                       budgets=budgets, heartbeat_ms=None if heartbeat is None else int(heartbeat),
                       lease_ms=DEFAULT_LEASE_MS if lease is None else lease,
                       continue_after_ms=0 if continue_after is None else int(continue_after),
                       approval_tools=approval, tools=tuple(tools),
                       max_live_runs=_positive(env, "MAX_LIVE_RUNS"),
                       max_live_runs_total=_positive(env, "MAX_LIVE_RUNS_TOTAL"),
                       chat_ttl_ms=chat_ttl_ms(env),
                       max_log_bytes=_positive(env, "MAX_LOG_BYTES") or DEFAULT_MAX_LOG_BYTES)


def _built(model: ModelFor, env: Any) -> ModelAdapter | RoutedModel:
    """``model(env)``, or a ``misconfigured`` 500 saying why not."""
    try:
        built = model(env)
    except UsageError as exc:  # create_model's messages name variables, never a key
        raise HttpError(500, "misconfigured", f"the Worker's model: {exc}") from None
    if not isinstance(built, (ModelAdapter, RoutedModel)):
        raise HttpError(500, "misconfigured", "the Worker's model must return a ModelAdapter or "
                        f"a RoutedModel (what create_model builds), got {type(built).__name__}")
    return built


def chat_ttl_ms(env: Any) -> int | None:
    """``CHAT_TTL_MS``: how long a chat's storage outlives its last run (milliseconds; unset or
    ``0``: kept until deleted); a value that is not a whole number is a ``misconfigured`` 500."""
    ttl = _budget(env, "CHAT_TTL_MS", None)
    return None if ttl is None else int(ttl)


def _budget(env: Any, name: str, default: float | None) -> float | None:
    """A millisecond budget var: a positive integer, or ``0`` to switch the bound off."""
    raw = _setting(env, name)
    if raw is None:
        return default
    if not raw.isdigit():
        raise HttpError(500, "misconfigured", f"{name} must be milliseconds (0: off), got {raw!r}")
    return None if int(raw) == 0 else float(raw)


def _positive(env: Any, name: str) -> int | None:
    raw = _setting(env, name)
    if raw is None:
        return None
    if not raw.isdigit() or int(raw) < 1:
        raise HttpError(500, "misconfigured", f"{name} must be a positive integer, got {raw!r}")
    return int(raw)


def route_plan(config: AgentConfig) -> RoutePlan:
    """Primary first, then the fallback: a failed attempt (a 503, a dropped stream) moves on."""
    model_id = canonical_model_id("worker/agent")
    candidates = tuple(
        RouteCandidate(provider_id=provider_id(p.id), canonical_model_id=model_id,
                       provider_invocation_model=p.model, credential_source="platform")
        for p in config.providers)
    return RoutePlan(stages=(RouteStage(
        role="primary", model=model_id,
        policy=OrderedPolicy(providers=tuple(c.provider_id for c in candidates)),
        candidates=candidates),))


# -- one run -------------------------------------------------------------------------------------


class _Sink:
    """The SSE client re-renders from events (harness/wasm/demo/turn-stream.js), so it can be told to
    discard a failed attempt's text: retractable, and routing keeps its whole fallback chain."""

    retractable = True

    def __init__(self, emit: Callable[[TurnStreamEvent], None]) -> None:
        self._emit = emit

    def emit(self, event: TurnStreamEvent, /) -> None:
        self._emit(event)


class SessionRun(msgspec.Struct, frozen=True, kw_only=True):
    """One settled run: ``checkpoint`` is what to store (one revision after the input, status
    ``finished`` or ``waiting_for_reply``), ``text`` the final answer (``""`` when suspended)."""

    checkpoint: LoopCheckpoint
    stop_reason: StopReason
    text: str


TransportFor = Callable[[Provider, Sequence[tuple[str, str]]], Transport]


def build_model(config: AgentConfig, *, transport_for: TransportFor,
                on_turn_event: Callable[[TurnStreamEvent], None], turn_prefix: str,
                first_turn: int, limit_store: LimitStore | None = None,
                clock: Clock | None = None) -> Model:
    """The providers (or the Worker's own model: its route plan, or its one adapter as a plan of
    one) as one agent model: a :class:`RoutedModel` over the route plan whose turn text
    stream (one per model call, ``turn_id`` = ``<turn_prefix>:<n>`` counting from ``first_turn``)
    goes to ``on_turn_event`` live, with the fallback's ``reset`` — then the rate limit, when the
    config has one, in ``limit_store`` under the key ``providers`` (``clock``: milliseconds every
    sharer of the store agrees on)."""
    models: dict[str, ModelAdapter] = {}
    own = config.model
    if own is not None:  # the Worker's model: its plan and adapters, routed with this run's turns
        routed = fallback_route(own) if isinstance(own, ModelAdapter) else own
        plan, models = routed.plan, dict(routed.models)
    else:
        plan = route_plan(config)
    for p in config.providers:
        adapter = create_wire_adapter(p.wire)
        models[p.id] = ModelAdapter(adapter, transport_for(p, adapter.auth_headers(p.api_key)),
                                    WireOptions(model=p.model, stream=True), budgets=config.budgets)
    turn = [first_turn]
    sink = _Sink(on_turn_event)

    def next_stream() -> TurnTextStream:
        turn[0] += 1
        return create_turn_text_stream(turn_id=f"{turn_prefix}:{turn[0]}", sink=sink)

    model = RoutedModel(plan=plan, models=models, text_stream=next_stream,
                        id="worker/agent")
    if config.rate_limit_rpm is None and config.rate_limit_concurrency is None:
        return model
    if limit_store is None or clock is None:
        raise HttpError(500, "misconfigured", "RATE_LIMIT_* is set but the Worker has no rate-limit "
                        "store binding (LIMITS in wrangler.jsonc)")
    return augment_model(model, [create_simple_limit_middleware(
        rpm=config.rate_limit_rpm, concurrency=config.rate_limit_concurrency,
        key="providers", store=limit_store, clock=clock)])


SaveFn = Callable[[LoopCheckpoint], Awaitable[None]]


def tool_event(event: AgentStreamEvent) -> dict[str, Any] | None:
    """The ``/v1`` stream's ``tool`` event for a run event, ``None`` for any other: ``{"phase":
    "started", "id", "name", "arguments"}`` as a call starts (its arguments as the model sent
    them, a JSON string) and ``{"phase": "finished", "id", "name", "outcome", ...}`` as it
    finishes, with the outcome's fields -- ``content`` of a ``result``, ``error`` and ``kind`` of
    an ``error`` (for a raise, the redacted text the model reads, never the exception's
    message), ``mode`` and ``detail`` of a ``suspend``; ``"outcome": "fatal"`` when the raise
    stops the run."""
    inner = event.event
    if isinstance(inner, ToolStartedEvent):
        call = inner.call
        return {"phase": "started", "id": call.id, "name": call.name, "arguments": call.arguments}
    if isinstance(inner, ToolFinishedEvent):
        call = inner.call
        shown: dict[str, Any] = {"phase": "finished", "id": call.id, "name": call.name}
        if inner.outcome is None:
            return {**shown, "outcome": "fatal"}
        fields: dict[str, Any] = msgspec.to_builtins(inner.outcome)
        return {**shown, **fields}
    return None


async def run_session(stored: LoopCheckpoint, *, model: Model, tools: Sequence[Tool[Any, Any]] = (),
                      save: SaveFn | None = None,
                      on_tool: Callable[[dict[str, Any]], None] | None = None) -> SessionRun:
    """Run a stored ``ready`` checkpoint with ``tools`` until it settles, through the agent API.

    A transcript that ends in a tool message (a reply was applied, or a save after a finished tool
    round: a run that failed there) continues with ``resume_chat``; any other (a new user message)
    is a new ``prompt_chat`` over the stored history, bounded by what is left of the session's
    ``max_iterations``. ``save`` (the store's commit) gets the session's checkpoint after every
    finished tool round (``on_checkpoint``), revisions one apart from ``stored.revision + 1``; a
    raise from it fails the run there. The settled result is not stored here: the caller commits
    :attr:`SessionRun.checkpoint`, one revision after the last save. A failure (every provider
    failed, the turn budget ran out) propagates, and storage holds the last save (or ``stored``).
    """
    left = stored.max_iterations - stored.iterations
    if left < 1:
        raise HttpError(409, "iteration_limit", f"the session used all {stored.max_iterations} "
                        "model turns (MAX_ITERATIONS); start a new session")
    resuming = bool(stored.messages) and isinstance(stored.messages[-1], ToolMessage)
    revision = [stored.revision]  # the last revision written: the input's, then each save's

    async def on_checkpoint(chat_cp: LoopCheckpoint) -> None:
        assert save is not None
        if chat_cp.status != "ready":  # the chat's last one: the caller commits it (SessionRun)
            return
        cp = session_checkpoint(stored, chat_cp, resumed=resuming, revision=revision[0] + 1)
        await save(cp)
        revision[0] = cp.revision

    async def handler(_: None) -> ChatResult:
        for tool in tools:
            equip_tool(tool)
        if on_tool is not None:
            report = on_tool

            def watch(event: AgentStreamEvent) -> None:
                shown = tool_event(event)
                if shown is not None:
                    report(shown)

            on_event(watch)
        hook = None if save is None else on_checkpoint
        if resuming:
            return await resume_chat(stored, on_checkpoint=hook)
        equip_history(stored.messages, source=stored)
        return await prompt_chat(max_turn_steps=left, max_total_turns=left, on_checkpoint=hook)

    chat = await create_agent(id="worker", handler=handler, model=model)(None)
    return SessionRun(checkpoint=settled_checkpoint(stored, chat, resumed=resuming,
                                                    revision=revision[0] + 1),
                      stop_reason=chat.stop_reason, text=chat.data)


def session_checkpoint(stored: LoopCheckpoint, cp: LoopCheckpoint, *, resumed: bool,
                       revision: int) -> LoopCheckpoint:
    """A checkpoint of the chat run from ``stored`` (a save, a suspend) as the session's, at
    ``revision``: ``resume_chat``'s already are (it runs ``stored`` itself); ``prompt_chat``'s count
    only that prompt, so the session's id, budget, earlier turns, spend and bindings are put back."""
    agents = cp
    if not resumed:
        counters = msgspec.structs.replace(cp.counters, requested_tool_calls=(
            stored.counters.requested_tool_calls + cp.counters.requested_tool_calls))
        cp = msgspec.structs.replace(
            cp, execution_id=stored.execution_id, max_iterations=stored.max_iterations,
            iterations=stored.iterations + cp.iterations, counters=counters,
            stats=accumulate_run(stored.stats, cp.stats), bindings=stored.bindings)
    # Refuses what parse_loop_checkpoint would refuse on reload; the agent's own checkpoint was
    # validated when it was made, so only what differs from it is checked again.
    return validate_loop_checkpoint(msgspec.structs.replace(cp, revision=revision),
                                    previous=agents)


def settled_checkpoint(stored: LoopCheckpoint, chat: ChatResult, *, resumed: bool,
                       revision: int | None = None) -> LoopCheckpoint:
    """What to store after ``chat`` ran from ``stored``, at ``revision`` (default one after
    ``stored``; after saves, one after the last): the session's id, budget and cumulative spend
    kept. A suspend stores the agent's checkpoint (:func:`session_checkpoint`); a finished chat
    stores the transcript with the chat's ``delta`` appended."""
    rev = stored.revision + 1 if revision is None else revision
    if chat.checkpoint is not None and chat.stop_reason != "done":
        return session_checkpoint(stored, chat.checkpoint, resumed=resumed, revision=rev)
    # The counters go on from the stored ones too: every tool call the chat's turns requested is
    # added (a stored checkpoint needs requested >= stats.tool_calls). The chat's last token
    # figures are not in a ChatResult, so the stored ones are marked stale.
    requested = sum(len(m.tool_calls) for m in chat.delta if isinstance(m, AssistantMessage))
    counters = LoopCounters(
        requested_tool_calls=stored.counters.requested_tool_calls + requested,
        last_prompt_tokens=stored.counters.last_prompt_tokens,
        last_output_tokens=stored.counters.last_output_tokens, has_fresh_token_count=False)
    cp = msgspec.structs.replace(
        stored, revision=rev, status="finished", open_suspends=(),
        messages=(*stored.messages, *chat.delta), counters=counters,
        iterations=stored.iterations + chat.stats.turns,
        stats=accumulate_run(stored.stats, chat.stats))
    # Refuses what parse_loop_checkpoint would refuse on reload; the stored transcript (read and
    # validated) is not checked again, only the chat's delta.
    return validate_loop_checkpoint(cp, previous=stored)


def stopped_checkpoint(latest: LoopCheckpoint) -> LoopCheckpoint:
    """What to store when a run used its whole turn budget: ``latest`` (what storage holds: the
    run's last save, or its input) marked ``aborted`` one revision later, so the session takes a
    new message again. The finished rounds up to the last save are kept; the round of the turn
    that hit the limit (after the last save) is not stored, nor counted in ``iterations``."""
    return validate_loop_checkpoint(
        msgspec.structs.replace(latest, revision=latest.revision + 1, status="aborted"),
        previous=latest)


# -- what a client is told when a run fails ------------------------------------------------------

_URL = re.compile(r"\b[a-z][a-z0-9+.-]*://\S+", re.I)


def error_event(exc: BaseException, *, session_id: str, revision: int) -> dict[str, Any]:
    """The SSE ``error`` event's data for a run that failed with ``exc``; ``revision`` is the one
    the run last wrote (or its claim).

    An :class:`HttpError` that names the stored revision (a refused save: storage is at another
    writer's revision) keeps it -- that, not the run's own, is what a resume must name. A provider
    failure says which provider and what kind of failure (``category``, HTTP status), never the
    upstream URL or what the provider said; anything else is named by its type only. No message
    carries a URL (a base URL can hold a key or an internal host name)."""
    if isinstance(exc, HttpError):
        body = {"error": exc.code, "message": exc.message, **exc.extra}
    elif isinstance(exc, AttemptError):
        status = "" if exc.status_code is None else f" (HTTP {exc.status_code})"
        where = "" if exc.target is None else f" at provider {exc.target.provider_id!s}"
        body = {"error": "provider_failed", "category": exc.category,
                "message": f"the model call failed{where}: {exc.category}{status}"}
        if exc.status_code is not None:
            body["status"] = exc.status_code
    elif isinstance(exc, ProviderError):
        body = {"error": type(exc).__name__,
                "message": f"the model call failed: {_URL.sub('<url>', str(exc))}"}
    else:
        body = {"error": "internal_error", "message": f"the run failed ({type(exc).__name__}); "
                "the session keeps its last saved round"}
    body["message"] = _URL.sub("<url>", str(body["message"]))
    return {"session_id": session_id, "revision": revision, **body}


def run_view(state: dict[str, Any]) -> dict[str, Any]:
    """A session's run as ``GET`` shows it, from the Session object's ``state()``: ``running`` (its
    lease renewed within ``RUN_LEASE_MS``), ``lost`` (its isolate died: the lease ran out, never
    renewed nor released; the object's alarm continues it) or ``idle``; ``last`` is how the last
    run ended (``finished``, ``waiting_for_reply``, ``aborted``, ``failed`` or ``lost``)."""
    lease, last = state.get("lease"), state.get("last_run")
    view: dict[str, Any]
    if lease is not None and lease["expires_in_ms"] > 0:
        view = {"state": "running", "run_id": lease["run"], "lease_ms_left": lease["expires_in_ms"]}
    elif lease is not None:
        view = {"state": "lost", "run_id": lease["run"]}
    else:
        view = {"state": "idle"}
    if last is not None:
        view["last"] = {"run_id": last["run"], "outcome": last["outcome"]}
    return view
