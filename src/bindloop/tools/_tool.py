"""``define_tool``: a tool whose msgspec Struct is the single source of truth for its arguments —
written by hand (the explicit form) or derived from a plain function's signature."""

from __future__ import annotations

import inspect
import re
from collections.abc import Awaitable, Callable, Mapping
from .._awaitable import isawaitable
from typing import Any, Generic, TypeAlias, TypeVar, overload

import msgspec

from ..contracts import (
    ToolDefinition,
    ToolError,
    ToolOutcome,
    ToolResult,
    ToolSuspend,
)
from ..errors import PortContractError, UsageError
from ._arguments import ParsedArguments, read_tool_arguments
from ._function import describe_function
from ..schema import SchemaSanitizeError, sanitize_tool_schema

__all__ = (
    "RawArguments",
    "Tool",
    "ToolExecute",
    "define_tool",
    "tool_wire_definition",
)

ArgsT = TypeVar("ArgsT", bound=msgspec.Struct)
CtxT = TypeVar("CtxT")
T = TypeVar("T")

RawArguments: TypeAlias = str | bytes | Mapping[str, Any] | None
"""What a dispatcher hands a tool: the call's raw JSON text (``""`` and ``None`` mean no arguments,
as providers send either for a zero-argument call) or an already-parsed JSON object."""

ToolExecute: TypeAlias = Callable[[ArgsT, CtxT], Awaitable[ToolOutcome] | ToolOutcome]

# Provider tool-name rule shared by OpenAI, Anthropic and Gemini function declarations.
# Always ``fullmatch``: ``$`` also matches before a trailing newline.
_WIRE_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
_JSON = msgspec.json.Encoder()
_OUTCOMES = (ToolResult, ToolError, ToolSuspend)


class Tool(Generic[ArgsT, CtxT]):
    """A tool made by :func:`define_tool`. Immutable once built.

    ``parameters`` is the sanitized JSON Schema of ``args_type``; :meth:`parse_arguments` validates
    against the same type, so what the model is shown and what is accepted cannot drift.
    """

    __slots__ = ("_decode", "_execute", "args_type", "description", "name", "parameters")

    name: str
    description: str
    args_type: type[ArgsT]
    parameters: dict[str, object]

    def __init__(self, *, name: str, description: str, args_type: type[ArgsT],
                 parameters: dict[str, object], execute: ToolExecute[ArgsT, CtxT]) -> None:
        self.name = name
        self.description = description
        self.args_type = args_type
        self.parameters = parameters
        self._execute = execute
        # JSON text straight into ``args_type``: one decode, no intermediate dict (see
        # parse_arguments for why it accepts exactly what the documented reader does).
        self._decode = msgspec.json.Decoder(args_type).decode

    def __repr__(self) -> str:
        return f"Tool(name={self.name!r}, args_type={self.args_type.__name__})"

    def parse_arguments(self, raw: RawArguments) -> ArgsT | ToolError:
        """Validate ``raw`` into a typed instance (defaults applied), or return a ``validation``
        :class:`ToolError` naming the offending path. Never raises for bad input.

        ``raw`` is read by :func:`bindloop.tools.read_tool_arguments`, the one argument reader
        (``""`` and ``None`` are ``{}``; ``NaN``, ``1e999``, non-UTF-8 bytes and non-objects are
        refused), then validated against ``args_type`` as JSON is: object keys of a
        ``dict[int, ...]`` field read as the numbers they spell (JSON keys are always strings)."""
        if type(raw) is str and raw:
            # The common case, decoded straight into args_type. msgspec's typed decode refuses
            # everything the reader refuses (NaN, numbers out of range, lone surrogates, deep
            # nesting, non-objects) and gives equal values for the rest; anything it refuses
            # takes the path below, whose verdict and message stay the documented ones.
            try:
                return self._decode(raw)
            except (msgspec.DecodeError, RecursionError, UnicodeEncodeError):
                pass
        parsed = read_tool_arguments(raw)
        if not isinstance(parsed, ParsedArguments):
            return ToolError(error=f"Invalid arguments for {self.name}: {parsed.detail}",
                             kind="validation")
        try:
            return msgspec.convert(parsed.arguments, type=self.args_type, str_keys=True)
        except msgspec.ValidationError as exc:
            return ToolError(error=f"Invalid arguments for {self.name}: {exc}", kind="validation")

    def invoke(self, raw: RawArguments, ctx: CtxT) -> ToolOutcome | Awaitable[ToolOutcome]:
        """Parse ``raw`` and start the tool body: a bad argument comes back as the ``validation``
        :class:`ToolError` itself, else whatever the body returned — its awaitable not awaited
        and its outcome not checked. For a caller that awaits and checks the outcome itself, as
        the tool loop's driver does (``run_tool_call`` may return a value or an awaitable); every
        other caller wants :meth:`execute`."""
        parsed = self.parse_arguments(raw)
        if type(parsed) is ToolError:
            return parsed
        return self._execute(parsed, ctx)  # type: ignore[arg-type]  # not a ToolError: ArgsT

    async def execute(self, raw: RawArguments, ctx: CtxT) -> ToolOutcome:
        """Parse ``raw`` and run the tool with a typed instance.

        A bad argument comes back as a ``validation`` :class:`ToolError` — returned, not raised —
        whether this is called by a plugin or directly by a host's own dispatcher. Exceptions raised
        by the tool body propagate (the loop turns them into tool errors, or ends the run for a fatal
        one). No argument normalization happens here: that is the dispatcher's step, done once.

        Raises
        ------
        PortContractError
            When the tool body returns something other than a ToolResult / ToolError / ToolSuspend.
        """
        value = self.invoke(raw, ctx)
        outcome = await value if isawaitable(value) else value
        if not isinstance(outcome, _OUTCOMES):
            raise PortContractError(
                f"tool {self.name!r} returned {type(outcome).__name__}; expected ToolResult, "
                "ToolError or ToolSuspend"
            )
        return outcome


@overload
def define_tool(
    *,
    name: str,
    description: str,
    args: type[ArgsT],
    execute: ToolExecute[ArgsT, CtxT],
) -> Tool[ArgsT, CtxT]: ...
@overload
def define_tool(fn: Callable[..., Any], /, *, name: str | None = None,
                description: str | None = None) -> Tool[Any, Any]: ...
@overload
def define_tool(*, name: str | None = None, description: str | None = None,
                ) -> Callable[[Callable[..., Any]], Tool[Any, Any]]: ...
def define_tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    args: type[Any] | None = None,
    execute: ToolExecute[Any, Any] | None = None,
) -> Tool[Any, Any] | Callable[[Callable[..., Any]], Tool[Any, Any]]:
    """Define a tool from a plain function, or explicitly from a msgspec Struct.

    **From a function** — ``define_tool(fn)``, ``@define_tool``, or ``@define_tool(name=...,
    description=...)`` to override what is derived:

    - the name is the function's name; the description is its docstring's text before the first
      section; each parameter's description comes from ``Annotated[T, "text"]``, a
      ``msgspec.Meta(description=...)``, or the docstring's ``Args:`` / numpy ``Parameters`` /
      reST ``:param x:`` entry (in that order of precedence);
    - the parameters become a msgspec Struct (type hints, defaults, ``Annotated`` constraints), whose
      sanitized JSON schema is ``parameters`` and which decodes and validates the model's
      arguments exactly as in the explicit form: bad arguments are the same ``validation``
      :class:`~bindloop.contracts.ToolError`;
    - a parameter annotated :class:`~bindloop.tools.ToolContext` receives the call's context
      (what the dispatcher passes as ``ctx``) and is not in the schema;
    - the function may be sync or async. A sync function is called directly on the event loop
      (there are no threads on Pyodide and workerd), so it must not block: do blocking work in an
      async function;
    - what it returns becomes the outcome: a ``ToolResult`` / ``ToolError`` / ``ToolSuspend`` as
      is, a ``str`` as the result text, anything else as JSON text (Structs, dicts, lists,
      numbers; ``None`` is ``null``). A value msgspec cannot encode is a ``PortContractError``.

    **Explicitly** — ``define_tool(name=, description=, args=, execute=)``: ``args`` is the
    single source of truth: its JSON Schema (``msgspec.json.schema``, then
    :func:`~bindloop.schema.sanitize_tool_schema`) is what the model sees, and the same type validates
    what comes back — defaults, ``Meta`` constraints, optionals, unions, enums and nested Structs
    included. ``execute(args, ctx)`` receives a typed ``args`` instance and the host's context; it may
    be a plain or a coroutine function and must return a tool outcome.

    Raises
    ------
    UsageError
        When the tool is defined, never when the model calls it: the name is empty; the function
        cannot be described (a parameter without a type hint, a type msgspec cannot express such as
        a socket or a ``Callable``, a default that is not JSON, ``*args`` / ``**kwargs``, no usable
        ``__name__`` without ``name=``) — the message names the function and the parameter;
        ``args`` is not a msgspec Struct type or its schema is not an object; or the two forms are
        mixed.
    """
    if args is not None or execute is not None:
        if fn is not None:
            raise UsageError("define_tool: pass a function, or args= and execute=, not both")
        if args is None or execute is None:
            raise UsageError("define_tool: the explicit form takes both args= (a msgspec Struct) "
                             "and execute=; or pass a plain function")
        if name is None or description is None:
            raise UsageError("define_tool: the explicit form takes name= and description=")
        return _define_explicit(name=name, description=description, args=args, execute=execute)
    if fn is None:
        def decorate(function: Callable[..., Any]) -> Tool[Any, Any]:
            return _define_function(function, name=name, description=description)
        return decorate
    return _define_function(fn, name=name, description=description)


def _define_function(fn: Callable[..., Any], *, name: str | None,
                     description: str | None) -> Tool[Any, Any]:
    if isinstance(fn, Tool) or not callable(fn):
        raise UsageError(f"define_tool: {fn!r} is not a function")
    if name is not None:
        _check_name(name)
    spec = describe_function(fn, name=name, description=description)
    _check_name(spec.name)
    if not _WIRE_NAME.fullmatch(spec.name):
        raise UsageError(f"define_tool: {spec.name!r} is not a valid provider tool name "
                         "([A-Za-z0-9_-], 1-64 chars)" + ("" if name is not None else
                                                          "; pass name="))
    try:
        parameters = sanitize_tool_schema(msgspec.json.schema(spec.args_type))
    except (SchemaSanitizeError, TypeError, ValueError) as exc:
        raise UsageError(f"define_tool({spec.name}): its parameters have no tool schema: "
                         f"{exc}") from exc
    return Tool(name=spec.name, description=spec.description, args_type=spec.args_type,
                parameters=parameters, execute=spec.execute)


def _check_name(name: object) -> None:
    if not isinstance(name, str) or not name or name != name.strip():
        raise UsageError(f"tool name must be a non-empty string without surrounding spaces: {name!r}")


def _define_explicit(*, name: str, description: str, args: type[ArgsT],
                     execute: ToolExecute[ArgsT, CtxT]) -> Tool[ArgsT, CtxT]:
    _check_name(name)
    if not (isinstance(args, type) and issubclass(args, msgspec.Struct)):
        raise UsageError(f"define_tool(args=...) must be a msgspec.Struct subclass, got {args!r}")
    if not callable(execute):
        raise UsageError("define_tool(execute=...) must be callable")
    _check_arity(name, execute)
    try:
        parameters = sanitize_tool_schema(msgspec.json.schema(args))
    except SchemaSanitizeError as exc:
        raise UsageError(f"tool {name!r}: the args Struct has no object schema: {exc}") from exc
    return Tool(name=name, description=description, args_type=args, parameters=parameters,
                execute=execute)


def _check_arity(name: str, execute: Callable[..., Any]) -> None:
    """``execute`` must take ``(args, ctx)``: a function written without its context would only
    fail when the model calls it (a TypeError the model reads), so it is refused here."""
    try:
        signature = inspect.signature(execute)
    except (TypeError, ValueError):
        return  # a builtin or C callable without a readable signature: trusted as given
    try:
        signature.bind(None, None)
    except TypeError:
        shown = ", ".join(signature.parameters) or "no parameters"
        raise UsageError(
            f"tool {name!r}: execute= is called as execute(args, ctx), but it takes ({shown}); "
            "add the context parameter, or pass the plain function itself "
            "(define_tool(fn)) to have its parameters read from its type hints") from None


def tool_wire_definition(tool: Tool[Any, Any], wire_name: str | None = None) -> ToolDefinition:
    """What the provider is shown for ``tool``: its sanitized parameters under ``wire_name`` (tool
    naming is host policy — e.g. ``plugin__tool`` to route a call back to its plugin) or its own name.

    Raises
    ------
    UsageError
        The name is not a valid provider tool name (``[A-Za-z0-9_-]{1,64}``).
    """
    name = tool.name if wire_name is None else wire_name
    if not _WIRE_NAME.fullmatch(name):
        raise UsageError(f"{name!r} is not a valid provider tool name ([A-Za-z0-9_-], 1-64 chars)")
    return ToolDefinition(name=name, description=tool.description, parameters=tool.parameters)
