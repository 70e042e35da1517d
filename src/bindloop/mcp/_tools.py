"""An MCP server's tools as bindloop tools, and a server as a plugin for the registry."""

from __future__ import annotations

import copy
import inspect
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, TypeAlias

import msgspec

from ..tools import ParsedArguments, read_tool_arguments
from ..contracts import ToolDefinition, ToolError, ToolOutcome, ToolResult, ToolSuspend
from ..errors import RunCancelledError, ToolFailure, UsageError
from ..tools import RawArguments, ResolveOutcome, Tool, ToolRegistry, tool_wire_definition
from ..signal import AbortSignal
from ..schema import SchemaSanitizeError, first_schema_violation, sanitize_tool_schema
from ._content import map_call_result
from ._deferred import encode_pending
from ._errors import McpInputPending
from ._errors import McpError
from ._http import McpHttpClient
from ._pending import RUN_AGENT
from ._protocol import CallToolResult, McpToolInfo, SkippedMcpTool
from ._session import McpProgress

__all__ = (
    "McpArguments",
    "McpServerPlugin",
    "McpTool",
    "McpToolset",
    "ToolFilter",
    "ToolProgress",
    "build_mcp_tools",
    "load_mcp_tools",
    "mcp_plugin_resolver",
)

ToolFilter: TypeAlias = Iterable[str] | Callable[[str], bool] | None
"""Which server tools to offer, by their MCP names: all (``None``), those named, or those a
predicate accepts."""
ToolProgress: TypeAlias = Callable[[str, McpProgress], None]
"""``on_progress(wire_tool_name, progress)``: a tool's progress notifications, as they arrive."""

_WIRE_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
_NOT_WIRE = re.compile(r"[^A-Za-z0-9_-]")
_PREFIX = re.compile(r"[A-Za-z0-9_-]{0,40}")


class McpArguments(msgspec.Struct, frozen=True):
    """The validated arguments of an MCP tool call: the JSON object sent to the server."""

    values: dict[str, Any]


class McpTool(Tool[McpArguments, Any]):
    """A bindloop :class:`~bindloop.tools.Tool` that calls a tool on an MCP server.

    ``name`` is the namespaced wire name the model sees; ``mcp_name`` the server's own name.
    ``parameters`` is the server's ``inputSchema`` after
    :func:`~bindloop.schema.sanitize_tool_schema` (what the model sees); :meth:`parse_arguments`
    checks a call against ``input_schema``, the server's own schema, before anything is sent,
    returning a ``validation`` :class:`ToolError` — so a rewrite for the model never refuses a call
    the server would take, and nothing it dropped goes unchecked.

    The ``ctx`` given to :meth:`execute` may be an :class:`~bindloop.signal.AbortSignal`, or carry
    one as ``ctx.signal``: when it fires mid-call the server gets ``notifications/cancelled`` and
    the call comes back as a ``cancelled`` :class:`ToolError` (the transcript stays paired).
    Protocol and connection failures raise :class:`~bindloop.errors.ToolFailure` whose message
    names the server (its ``__cause__`` is the :class:`~bindloop.mcp.McpError`): the messages are
    bindloop's own and hold no header or credential, so the model reads them verbatim rather than
    the masked text ``format_tool_exception`` gives an unexpected raise. A host that wants such a
    failure to end the run says so in ``is_fatal_tool_error`` by looking at the cause.
    """

    __slots__ = ("input_schema", "mcp_name", "server")

    mcp_name: str
    server: str
    input_schema: Mapping[str, Any]

    def __init__(self, *, name: str, mcp_name: str, server: str, description: str,
                 parameters: dict[str, object],
                 execute: Callable[[McpArguments, Any], Awaitable[ToolOutcome]],
                 input_schema: Mapping[str, Any] | None = None) -> None:
        super().__init__(name=name, description=description, args_type=McpArguments,
                         parameters=parameters, execute=execute)
        self.mcp_name = mcp_name
        self.server = server
        self.input_schema = parameters if input_schema is None else input_schema

    def __repr__(self) -> str:
        return f"McpTool(name={self.name!r}, server={self.server!r}, mcp_name={self.mcp_name!r})"

    def parse_arguments(self, raw: RawArguments) -> McpArguments | ToolError:
        parsed = read_tool_arguments(raw)  # the one argument reader, as for every tool
        if not isinstance(parsed, ParsedArguments):
            return ToolError(error=f"Invalid arguments for {self.name}: {parsed.detail}",
                             kind="validation")
        value = parsed.arguments
        problem = first_schema_violation(value, self.input_schema)
        if problem is not None:
            return ToolError(error=f"Invalid arguments for {self.name}: {problem}",
                             kind="validation")
        return McpArguments(values=value)

    def with_signal_source(self, source: Callable[[], AbortSignal | None], *,
                           agent: Callable[[], str | None] | None = None) -> McpTool:
        """This tool, watching ``source()`` (read at each call) when its ``ctx`` carries no signal
        of its own: how ``bindloop.agent.equip_mcp`` gives its tools the agent run's abort signal.
        ``agent()`` names the agent making the call, for the elicitations it meets
        (:class:`~bindloop.mcp.server_requests.PendingElicitation`)."""
        inner = self._execute

        async def execute(args: McpArguments, ctx: Any) -> ToolOutcome:
            if _signal_of(ctx) is None:
                signal = source()
                if signal is not None:
                    ctx = signal
            named = None if agent is None else RUN_AGENT.set(agent())
            try:
                outcome = inner(args, ctx)
                return await outcome if inspect.isawaitable(outcome) else outcome
            finally:
                if named is not None:
                    RUN_AGENT.reset(named)

        clone = copy.copy(self)  # every attribute kept (schemas, names), only the call wrapped
        clone._execute = execute
        return clone



def output_schema_violation(value: Any, schema: Mapping[str, Any]) -> str | None:
    """Where a tool's ``structuredContent`` breaks its ``outputSchema`` (``None``: it fits), by
    the same validator the arguments are checked with."""
    return first_schema_violation(value, schema)

@dataclass(frozen=True, slots=True)
class McpToolset:
    """What a server offers the model: ``tools`` in the server's order, and ``skipped`` entries
    with the reason each was left out. This is exactly what ``equip_mcp`` equips."""

    server: str
    tools: tuple[McpTool, ...]
    skipped: tuple[SkippedMcpTool, ...] = ()

    def definitions(self) -> tuple[ToolDefinition, ...]:
        return tuple(tool_wire_definition(t) for t in self.tools)


def _signal_of(ctx: Any) -> AbortSignal | None:
    if isinstance(ctx, AbortSignal):
        return ctx
    signal = getattr(ctx, "signal", None)
    return signal if isinstance(signal, AbortSignal) else None


def _allowed(allow: ToolFilter) -> Callable[[str], bool]:
    if allow is None:
        return lambda _name: True
    if callable(allow):
        return allow
    if isinstance(allow, str):
        raise UsageError("allow= takes tool names (an iterable of str), not one string")
    names = frozenset(allow)
    return names.__contains__


def _wire_name(prefix: str, mcp_name: str) -> str:
    joined = f"{prefix}__{mcp_name}" if prefix else mcp_name
    return _NOT_WIRE.sub("_", joined)


def build_mcp_tools(client: McpHttpClient, infos: Sequence[McpToolInfo], *,
                    prefix: str | None = None, allow: ToolFilter = None,
                    on_progress: ToolProgress | None = None,
                    skipped: Sequence[SkippedMcpTool] = ()) -> McpToolset:
    """Turn listed tools into :class:`McpTool` values calling through ``client``.

    Names are namespaced as ``<prefix>__<tool>`` (``prefix`` defaults to the client's server name;
    ``""`` keeps the server's names), characters a provider refuses replaced by ``_``, so two
    servers cannot collide. A tool is skipped, with a reason, when ``allow`` filters it out, when
    the sanitizer refuses its schema, or when its namespaced name is too long or taken.

    Raises
    ------
    UsageError
        ``prefix`` is not 0-40 characters of ``[A-Za-z0-9_-]`` (after replacing others by ``_``
        when it defaults to the server name).
    """
    server = client.server
    chosen = _NOT_WIRE.sub("_", server)[:40] if prefix is None else prefix
    if not isinstance(chosen, str) or not _PREFIX.fullmatch(chosen):
        raise UsageError(f"MCP tool prefix {chosen!r} must be 0-40 characters of [A-Za-z0-9_-]")
    wanted = _allowed(allow)
    out: list[McpTool] = []
    left_out = list(skipped)
    taken: set[str] = set()
    for info in infos:
        if not wanted(info.name):
            left_out.append(SkippedMcpTool(server=server, name=info.name, reason="not allowed"))
            continue
        wire = _wire_name(chosen, info.name)
        if not _WIRE_NAME.fullmatch(wire):
            left_out.append(SkippedMcpTool(server=server, name=info.name,
                                           reason=f"namespaced name {wire[:80]!r} is not 1-64 "
                                                  "characters"))
            continue
        if wire in taken:
            left_out.append(SkippedMcpTool(server=server, name=info.name,
                                           reason=f"namespaced name {wire!r} is already taken"))
            continue
        try:
            parameters = sanitize_tool_schema(info.input_schema)
        except SchemaSanitizeError as exc:
            left_out.append(SkippedMcpTool(server=server, name=info.name,
                                           reason=f"input schema refused: {exc}"))
            continue
        taken.add(wire)
        out.append(McpTool(name=wire, mcp_name=info.name, server=server,
                           description=info.description or info.title or "",
                           parameters=parameters, input_schema=info.input_schema,
                           execute=_caller(client, wire, info.name, on_progress)))
    return McpToolset(server=server, tools=tuple(out), skipped=tuple(left_out))


def _caller(client: McpHttpClient, wire: str, mcp_name: str,
            on_progress: ToolProgress | None) -> Callable[[McpArguments, Any],
                                                          Awaitable[ToolOutcome]]:
    progress: Callable[[McpProgress], None] | None = None
    if on_progress is not None:
        report = on_progress

        def progress(event: McpProgress) -> None:
            report(wire, event)

    async def execute(args: McpArguments, ctx: Any) -> ToolOutcome:
        try:
            result = await client.call_tool(mcp_name, args.values, signal=_signal_of(ctx),
                                            on_progress=progress)
        except RunCancelledError as exc:
            return ToolError(error=f"{wire} was cancelled ({exc})", kind="cancelled")
        except McpInputPending as waiting:
            # 2026-07-28 input kept for later: the run suspends with the request in its checkpoint.
            return ToolSuspend(mode="waiting_for_reply", detail=waiting.pending.question(),
                               state=encode_pending(waiting.pending))
        except McpError as exc:
            raise ToolFailure(client.redact(str(exc))) from exc
        return call_outcome(client, mcp_name, result)

    return execute


def call_outcome(client: McpHttpClient, mcp_name: str,
                 result: CallToolResult) -> ToolResult | ToolError:
    """What a call's result is to the model (:func:`map_call_result`), an error's text passed
    through the client's redaction rule."""
    outcome = map_call_result(result, server=client.server, tool=mcp_name)
    if isinstance(outcome, ToolError):
        # A server that echoes a credential into its error text must not hand it to the model.
        outcome = ToolError(error=client.redact(outcome.error), kind=outcome.kind)
    return outcome


async def load_mcp_tools(client: McpHttpClient, *, prefix: str | None = None,
                         allow: ToolFilter = None,
                         on_progress: ToolProgress | None = None) -> McpToolset:
    """Connect ``client`` if it is new, list every tool (all pages) and build the namespaced,
    sanitized, validated tools (see :func:`build_mcp_tools`). This is what
    ``equip_mcp(server, allow=..., prefix=...)`` equips in the agent API.

    Raises
    ------
    McpError
        The server could not be reached or did not speak MCP (the message names it).
    """
    if client.session.phase == "new":
        await client.connect()
    infos, malformed = await client.list_tools()
    return build_mcp_tools(client, infos, prefix=prefix, allow=allow, on_progress=on_progress,
                           skipped=malformed)


class McpServerPlugin:
    """An MCP server as a registry plugin, for progressive disclosure.

    Announced in the catalog by ``name`` and ``description`` alone: nothing connects until
    :meth:`load` (call it from the host's ``activate`` port for plugins, or let
    :func:`mcp_plugin_resolver` do it during ``rehydrate_activation``). ``connect()`` returns a
    client (connected or new); :meth:`load` then lists the tools. Before loading,
    :meth:`tool_definitions` is empty and :meth:`execute` answers ``not_found``.

    After the server announces ``tools/list_changed``, :meth:`refresh_if_stale` lists again — call
    it from an async ``build_tools`` port so the next model call sees the new surface.
    """

    __slots__ = ("_allow", "_client", "_connect", "_on_progress", "_prefix", "_tools", "_toolset",
                 "description", "name")

    def __init__(self, *, name: str, description: str,
                 connect: Callable[[], Awaitable[McpHttpClient]], prefix: str | None = None,
                 allow: ToolFilter = None, on_progress: ToolProgress | None = None) -> None:
        if not isinstance(name, str) or not name:
            raise UsageError("McpServerPlugin(name=...) must be a non-empty string")
        if not callable(connect):
            raise UsageError("McpServerPlugin(connect=...) must be an async callable")
        self.name = name
        self.description = description
        self._connect = connect
        self._prefix = name if prefix is None else prefix
        self._allow = allow
        self._on_progress = on_progress
        self._client: McpHttpClient | None = None
        self._toolset: McpToolset | None = None
        self._tools: Mapping[str, McpTool] = MappingProxyType({})

    def __repr__(self) -> str:
        return f"McpServerPlugin(name={self.name!r}, loaded={self.loaded})"

    @property
    def loaded(self) -> bool:
        return self._toolset is not None

    @property
    def toolset(self) -> McpToolset | None:
        """The last listing (tools and skipped entries), ``None`` before :meth:`load`."""
        return self._toolset

    async def load(self) -> McpToolset:
        """Connect if needed and list the tools (again, if loaded already)."""
        if self._client is None or self._client.session.phase == "closed":
            client = await self._connect()
            if not isinstance(client, McpHttpClient):
                raise UsageError(f"plugin {self.name!r}: connect() returned "
                                 f"{type(client).__name__}, not an McpHttpClient")
            self._client = client
        toolset = await load_mcp_tools(self._client, prefix=self._prefix, allow=self._allow,
                                       on_progress=self._on_progress)
        self._toolset = toolset
        self._tools = MappingProxyType({t.name: t for t in toolset.tools})
        return toolset

    async def refresh_if_stale(self) -> bool:
        """List the tools again when the server said they changed; ``True`` if it did."""
        if self._client is None or not self._client.session.tools_stale:
            return False
        await self.load()
        return True

    def tool_definitions(self) -> tuple[ToolDefinition, ...]:
        return () if self._toolset is None else self._toolset.definitions()

    async def execute(self, tool_name: str, arguments: RawArguments, ctx: Any) -> ToolOutcome:
        tool = self._tools.get(tool_name)
        if tool is None:
            state = "offers no such tool" if self.loaded else "is not loaded"
            return ToolError(error=f"Unknown tool {tool_name!r}: MCP plugin {self.name!r} {state}",
                             kind="not_found")
        return await tool.execute(arguments, ctx)

    async def aclose(self) -> None:
        """Close the connection (DELETE); the plugin can :meth:`load` again later."""
        client, self._client = self._client, None
        self._toolset = None
        self._tools = MappingProxyType({})
        if client is not None:
            await client.aclose()


def mcp_plugin_resolver(registry: ToolRegistry[Any]
                        ) -> Callable[[str], Awaitable[ResolveOutcome]]:
    """A ``resolve`` for :func:`~bindloop.tools.rehydrate_activation`: an unregistered name is
    ``"unknown"``; an :class:`McpServerPlugin` reconnects and lists its tools (a failure raises, so
    the walk drops it as ``unreachable`` with the server's error in ``detail``); any other
    registered plugin resolves as it is."""

    async def resolve(name: str) -> ResolveOutcome:
        plugin = registry.get(name)
        if plugin is None:
            return "unknown"
        if isinstance(plugin, McpServerPlugin):
            await plugin.load()
        return True

    return resolve
