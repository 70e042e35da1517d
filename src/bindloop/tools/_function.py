"""Tools from plain functions: the name, description and argument Struct derived from a function.

A function tool is an ordinary :class:`~bindloop.tools.Tool` whose ``args_type`` is a Struct built
here from the function's parameters, so its arguments are decoded and validated by exactly the code
the explicit form uses, and its schema goes through the same sanitizer. Everything that can be
wrong with the function is found here, once, when the tool is defined.
"""

from __future__ import annotations

import re
import typing
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Final, NamedTuple

import msgspec

from .._awaitable import isawaitable
from ..contracts import ToolError, ToolOutcome, ToolResult, ToolSuspend
from ..errors import PortContractError, UsageError
from ._context import ToolContext

__all__ = ("FunctionSpec", "describe_function", "parse_docstring")

_OUTCOMES: Final = (ToolResult, ToolError, ToolSuspend)
# Returns that are plainly data, never awaitable: no need to look for ``__await__``.
_DATA: Final = frozenset({int, float, bool, type(None), dict, list, tuple})
# Sorted keys: equal results give equal bytes (a set, or a dict built in another order, would not).
_ENCODE: Final = msgspec.json.Encoder(order="deterministic").encode
# An int's JSON text is its decimal digits: str() writes the same bytes without the encoder,
# under every limit an interpreter may set on int-to-text conversion (at least 640 digits).
_INT_TEXT_BOUND: Final = 10**600
_INT_TEXT_LOW: Final = -_INT_TEXT_BOUND  # made once: negating a 2,000-bit int costs a call

# Docstring section headers. Google: ``Args:`` on a line of its own; numpy: a title underlined
# with dashes; reST: ``:param name: text`` fields.
_GOOGLE_PARAMS: Final = frozenset({"args", "arguments", "parameters", "params", "keyword args",
                                   "keyword arguments", "other parameters"})
# Only the known titles: "Look them up in this order:" is a sentence, not a section.
_GOOGLE_TITLES: Final = _GOOGLE_PARAMS | frozenset({
    "returns", "return", "yields", "yield", "raises", "raise", "warns", "examples", "example",
    "notes", "note", "warnings", "warning", "see also", "attributes", "references", "todo",
    "methods", "receives"})
_GOOGLE_HEADER: Final = re.compile(r"([A-Za-z][A-Za-z ]*):\s*")
_NUMPY_RULE: Final = re.compile(r"-{3,}\s*")
_GOOGLE_ENTRY: Final = re.compile(r"\*{0,2}([A-Za-z_]\w*)\s*(?:\([^)]*\))?\s*:(.*)")
_NUMPY_ENTRY: Final = re.compile(r"\*{0,2}([A-Za-z_]\w*(?:\s*,\s*\*{0,2}[A-Za-z_]\w*)*)\s*(?::.*)?")
_REST_FIELD: Final = re.compile(r":(\w+)(?:\s+([^:]*?))?\s*:(.*)")
_REST_PARAM: Final = frozenset({"param", "parameter", "arg", "argument", "key", "keyword"})


class FunctionSpec(NamedTuple):
    """What :func:`describe_function` derived: the tool's name and description, the Struct its
    arguments decode into, and the ``execute(args, ctx)`` that calls the function with them."""

    name: str
    description: str
    args_type: type[msgspec.Struct]
    execute: Callable[[Any, Any], ToolOutcome | Awaitable[ToolOutcome]]


# ---- docstrings ---------------------------------------------------------------------------------

def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _join(parts: list[str]) -> str:
    """Lines wrapped in the source read as one line; blank lines keep paragraphs apart."""
    paragraphs: list[str] = []
    current: list[str] = []
    for part in parts:
        if part.strip():
            current.append(part.strip())
        elif current:
            paragraphs.append(" ".join(current))
            current = []
    if current:
        paragraphs.append(" ".join(current))
    return "\n\n".join(paragraphs)


def _section_at(lines: list[str], i: int) -> tuple[str, str] | None:
    """``(style, title)`` when a section starts at line ``i``, else None."""
    line = lines[i].strip()
    if i + 1 < len(lines) and line and _NUMPY_RULE.fullmatch(lines[i + 1].strip()) \
            and _indent(lines[i + 1]) == _indent(lines[i]):
        return "numpy", line.lower()
    google = _GOOGLE_HEADER.fullmatch(line)
    if google is not None and google.group(1).strip().lower() in _GOOGLE_TITLES:
        return "google", google.group(1).strip().lower()
    if _REST_FIELD.fullmatch(line):
        return "rest", ""
    return None


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """``(description, {parameter: description})`` read from a docstring.

    The description is the text before the first section (wrapped lines joined, paragraphs kept);
    parameter descriptions come from a Google ``Args:`` (or ``Arguments:`` / ``Parameters:``)
    section, a numpy ``Parameters`` section underlined with dashes, or reST ``:param name:``
    fields. Other sections (``Returns``, ``Raises``, ``Examples``...) are left out of both."""
    if not doc:
        return "", {}
    import inspect  # only when a tool is defined: ~9 ms of import that `import bindloop` skips

    lines = inspect.cleandoc(doc).splitlines()
    params: dict[str, str] = {}
    head: list[str] = []
    i = 0
    while i < len(lines) and _section_at(lines, i) is None:
        head.append(lines[i])
        i += 1
    while i < len(lines):
        found = _section_at(lines, i)
        if found is None:
            i += 1
            continue
        style, title = found
        if style == "rest":
            i = _rest_field(lines, i, params)
        elif style == "google":
            i = _google_section(lines, i, params if title in _GOOGLE_PARAMS else None)
        else:
            i = _numpy_section(lines, i, params if title in ("parameters", "other parameters")
                               else None)
    return _join(head), params


def _google_section(lines: list[str], i: int, params: dict[str, str] | None) -> int:
    base = _indent(lines[i])
    i += 1
    entry_indent: int | None = None
    name: str | None = None
    text: list[str] = []
    while i < len(lines):
        line = lines[i]
        if line.strip():
            if _indent(line) <= base:
                break
            if entry_indent is None:
                entry_indent = _indent(line)
            if _indent(line) <= entry_indent:
                match = _GOOGLE_ENTRY.fullmatch(line.strip())
                if name is not None and params is not None:
                    params[name] = _join(text)
                name, text = (match.group(1), [match.group(2)]) if match else (None, [])
                i += 1
                continue
        text.append(line)
        i += 1
    if name is not None and params is not None:
        params[name] = _join(text)
    return i


def _numpy_section(lines: list[str], i: int, params: dict[str, str] | None) -> int:
    base = _indent(lines[i])
    i += 2  # the title and its rule
    names: list[str] = []
    text: list[str] = []

    def flush() -> None:
        if params is not None:
            for one in names:
                params[one] = _join(text)

    while i < len(lines):
        line = lines[i]
        if line.strip() and _indent(line) <= base:
            if _section_at(lines, i) is not None:
                break
            flush()
            match = _NUMPY_ENTRY.fullmatch(line.strip())
            names = [n.strip().lstrip("*") for n in match.group(1).split(",")] if match else []
            text = []
        else:
            text.append(line)
        i += 1
    flush()
    return i


def _rest_field(lines: list[str], i: int, params: dict[str, str]) -> int:
    line = lines[i]
    match = _REST_FIELD.fullmatch(line.strip())
    assert match is not None  # _section_at said so
    kind, target, first = match.groups()
    text = [first]
    base = _indent(line)
    i += 1
    while i < len(lines) and (not lines[i].strip() or _indent(lines[i]) > base) \
            and not (lines[i].strip() and _section_at(lines, i)):
        text.append(lines[i])
        i += 1
    if kind in _REST_PARAM and target:
        params[target.split()[-1].lstrip("*")] = _join(text)
    return i


# ---- the function's parameters ------------------------------------------------------------------

def _strip_annotated(hint: Any) -> tuple[Any, tuple[Any, ...]]:
    if typing.get_origin(hint) is Annotated:
        return hint.__origin__, tuple(hint.__metadata__)
    return hint, ()


def _mentions_context(hint: Any) -> bool:
    if hint is ToolContext:
        return True
    return any(_mentions_context(arg) for arg in typing.get_args(hint))


def _hint_source(fn: Any) -> Any:
    """What holds ``fn``'s annotations: the function under a ``functools.partial``, the
    ``__call__`` of a callable object."""
    import functools

    while isinstance(fn, functools.partial):
        fn = fn.func
    if not hasattr(fn, "__code__") and not hasattr(fn, "__func__") and not isinstance(fn, type):
        call = getattr(type(fn), "__call__", None)
        if call is not None:
            return call
    return fn


def _unresolved(where: str, exc: Exception, sig: Any) -> UsageError:
    """The error for annotations that do not evaluate, naming the parameter when ``sig`` (with
    annotations as text) shows which one names the missing type."""
    missing = getattr(exc, "name", None)
    culprit = ""
    if isinstance(missing, str) and sig is not None:
        for p in sig.parameters.values():
            if isinstance(p.annotation, str) and re.search(rf"\b{re.escape(missing)}\b",
                                                           p.annotation):
                culprit = f" (parameter {p.name!r}: {p.annotation!r})"
                break
    return UsageError(
        f"{where}: cannot resolve its type hints{culprit}: {type(exc).__name__}: {exc}. "
        "Annotations are resolved in the function's module: define the types they name at "
        "module level")


def _signature(fn: Callable[..., Any], where: str) -> Any:
    import inspect

    try:
        return inspect.signature(fn)
    except (TypeError, ValueError) as exc:
        raise UsageError(f"{where}: cannot read the function's signature: {exc}") from exc
    except Exception as exc:  # from 3.14 annotations are evaluated here: NameError and the like
        as_text: Any = None
        try:  # annotationlib.Format.STRING (an IntEnum) on 3.14; a TypeError before
            signature: Any = inspect.signature
            as_text = signature(fn, annotation_format=4)
        except Exception:  # the error below names the missing type either way
            pass
        raise _unresolved(where, exc, as_text) from exc


def _docstring(fn: Any) -> str | None:
    """``fn``'s docstring; a ``functools.partial``'s is its function's unless one was set on it
    (the partial type's own docstring describes ``partial``, not the tool)."""
    import functools

    if isinstance(fn, functools.partial) and "__doc__" not in vars(fn):
        fn = _hint_source(fn)
    doc = getattr(fn, "__doc__", None)
    return doc if isinstance(doc, str) else None


def _resolve_hints(fn: Callable[..., Any], where: str, sig: Any) -> dict[str, Any]:
    try:
        return typing.get_type_hints(_hint_source(fn), include_extras=True)
    except Exception as exc:  # NameError, or any error raised while evaluating an annotation
        raise _unresolved(where, exc, sig) from exc


def _field_type(hint: Any, meta: tuple[Any, ...], doc: str | None) -> Any:
    """The parameter's type for the Struct: its description from ``Annotated[T, "text"]``, else
    from the docstring, added as ``Meta(description=)`` unless a ``Meta`` already gives one."""
    if any(isinstance(m, msgspec.Meta) and m.description is not None for m in meta):
        return Annotated[(hint, *meta)] if meta else hint
    text = next((m for m in meta if isinstance(m, str)), None)
    description = text if text is not None else doc
    kept = tuple(m for m in meta if not isinstance(m, str))
    if description:
        kept = (*kept, msgspec.Meta(description=description))
    return Annotated[(hint, *kept)] if kept else hint


def _default(value: Any, wire: str | None) -> Any:
    """The Struct field's default: ``value`` itself, or a ``msgspec.field`` when the field keeps
    another name on the wire or ``value`` is mutable (a non-empty list, dict or set, a Struct
    that is not frozen) — shared between calls, and refused by msgspec: each call gets a copy."""
    named: dict[str, Any] = {} if wire is None else {"name": wire}
    if (isinstance(value, (list, dict, set, bytearray)) and value) or (
            isinstance(value, msgspec.Struct) and not value.__struct_config__.frozen):
        import copy

        return msgspec.field(default_factory=lambda: copy.deepcopy(value), **named)
    return msgspec.field(default=value, **named) if named else value


def _explicit_hint(pname: str) -> str:
    # An explicit-form ``execute(args, ctx)`` handed to define_tool as if it were a function tool.
    if pname == "ctx":
        return ("; an execute(args, ctx) of the explicit form goes to define_tool(name=, "
                "description=, args=, execute=)")
    if pname == "self":  # @define_tool on a method in a class body
        return "; for a method, define the tool from the bound method: define_tool(obj.method)"
    return ""


def _free_name(base: str, taken: Any) -> str:
    while base in taken:
        base += "_"
    return base


def _function_name(fn: Callable[..., Any]) -> str | None:
    name = getattr(fn, "__name__", None)
    return name if isinstance(name, str) and name.isidentifier() else None


def describe_function(fn: Callable[..., Any], *, name: str | None,
                      description: str | None) -> FunctionSpec:
    """Derive a tool from ``fn`` (see :func:`~bindloop.tools.define_tool`).

    Raises
    ------
    UsageError
        The function cannot be described: no usable name, a parameter without a type hint, a type
        msgspec cannot express as JSON schema, a default that is not JSON, ``*args`` or
        ``**kwargs``, or a context parameter that is not annotated exactly ``ToolContext``.
    """
    import inspect  # only when a tool is defined: ~9 ms of import that `import bindloop` skips

    label = _function_name(fn) or repr(fn)
    where = f"define_tool({label})"
    if name is None:
        name = _function_name(fn)
        if name is None:
            raise UsageError(f"{where}: the function has no usable __name__ (a lambda, a partial "
                             "or a callable object); pass define_tool(fn, name=...)")
    sig = _signature(fn, where)
    hints = _resolve_hints(fn, where, sig)
    summary, param_docs = parse_docstring(_docstring(fn))

    fields: list[tuple[Any, ...]] = []
    positional: list[str] = []      # non-context parameters passed by position, in order
    keyword: list[str] = []         # keyword-only ones
    ctx_index: int | None = None    # where the context goes among the positional arguments
    ctx_keyword: str | None = None  # or its keyword
    for param in sig.parameters.values():
        pname = param.name
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            star = "*" if param.kind is param.VAR_POSITIONAL else "**"
            raise UsageError(f"{where}: parameter {star}{pname} cannot be described by a JSON "
                             "schema; name each parameter the model may pass")
        if pname not in hints:
            raise UsageError(f"{where}: parameter {pname!r} has no type hint; annotate it (the "
                             "hint is what the model is shown and what its argument is "
                             f"validated against){_explicit_hint(pname)}")
        hint, meta = _strip_annotated(hints[pname])
        if hint is ToolContext:
            if ctx_index is not None or ctx_keyword is not None:
                raise UsageError(f"{where}: parameter {pname!r} is a second ToolContext "
                                 "parameter; the context is passed once")
            if param.kind is param.KEYWORD_ONLY:
                ctx_keyword = pname
            else:
                ctx_index = len(positional)
            continue
        if _mentions_context(hint):
            raise UsageError(f"{where}: parameter {pname!r} is annotated {hints[pname]!r}; the "
                             "context parameter must be annotated exactly ToolContext")
        ftype = _field_type(hint, meta, param_docs.get(pname))
        try:
            msgspec.json.schema(ftype)
        except (TypeError, ValueError) as exc:
            shown = getattr(hint, "__qualname__", None) or repr(hint)
            raise UsageError(
                f"{where}: parameter {pname!r} has type {shown}, which msgspec cannot describe "
                f"as JSON schema ({str(exc).splitlines()[-1]}); use JSON types, Structs, "
                "Literals, enums, or a ToolContext parameter for the context"
                f"{_explicit_hint(pname)}") from exc
        # A Struct attribute cannot start with "__" (it would be name-mangled): such a parameter
        # keeps its name on the wire under another attribute name.
        wire = pname if pname.startswith("__") else None
        attr = pname if wire is None else _free_name(f"_p{len(fields)}", sig.parameters)
        if param.default is param.empty:
            fields.append((attr, ftype) if wire is None else
                          (attr, ftype, msgspec.field(name=wire)))
        else:
            try:
                _ENCODE(param.default)
            except (TypeError, ValueError, OverflowError) as exc:
                raise UsageError(f"{where}: parameter {pname!r} has the default "
                                 f"{param.default!r}, which is not JSON ({exc})") from exc
            fields.append((attr, ftype, _default(param.default, wire)))
        (keyword if param.kind is param.KEYWORD_ONLY else positional).append(pname)

    try:
        args_type = msgspec.defstruct(name, fields, kw_only=True, module=__name__)
    except (TypeError, ValueError, RuntimeError) as exc:
        raise UsageError(f"{where}: its parameters cannot be a msgspec Struct: {exc}") from exc
    return FunctionSpec(
        name=name,
        description=summary if description is None else description,
        args_type=args_type,
        execute=_caller(fn, name, len(positional), tuple(keyword), ctx_index, ctx_keyword,
                        inspect.iscoroutinefunction(fn)),
    )


# ---- calling it ---------------------------------------------------------------------------------

def _caller(fn: Callable[..., Any], tool: str, n_pos: int, keyword: tuple[str, ...],
            ctx_index: int | None, ctx_keyword: str | None, is_async: bool,
            ) -> Callable[[Any, Any], ToolOutcome | Awaitable[ToolOutcome]]:
    """``execute(args, ctx)`` for the decoded Struct: the function called with its fields (by
    position, then keyword-only by name) and the context where it asked for one; what it returns
    made an outcome. A coroutine function gets a coroutine; any other function answers at once
    (what it returns is awaited only if it is awaitable, e.g. a callable object's async
    ``__call__``), so a sync tool costs the loop no await."""
    astuple = msgspec.structs.astuple
    simple = not keyword and ctx_keyword is None and ctx_index is None
    call = _binder(fn, n_pos, keyword, ctx_index, ctx_keyword)

    if is_async:
        async def execute_async(args: Any, ctx: Any) -> ToolOutcome:
            return as_outcome(await call(args, ctx), tool)
        return execute_async

    def execute(args: Any, ctx: Any) -> ToolOutcome | Awaitable[ToolOutcome]:
        value = fn(*astuple(args)) if simple else call(args, ctx)
        # The common returns first, cheapest test first: a Struct check goes through msgspec's
        # metaclass, and isawaitable's attribute miss costs more than any of these.
        if type(value) is str:
            return ToolResult(content=value)
        if type(value) in _DATA:  # plain data (never a Struct or an awaitable): JSON text
            return _json_result(value, tool)
        if isinstance(value, msgspec.Struct):
            return value if isinstance(value, _OUTCOMES) else _json_result(value, tool)
        if isawaitable(value):
            return _finish_async(value, tool)
        return _json_result(value, tool)

    return execute


def _binder(fn: Callable[..., Any], n_pos: int, keyword: tuple[str, ...],
            ctx_index: int | None, ctx_keyword: str | None) -> Callable[[Any, Any], Any]:
    """``call(args, ctx)``: ``fn`` called with the Struct's fields and the context, one closure
    per shape so the common ones do no bookkeeping per call."""
    astuple = msgspec.structs.astuple
    if not keyword and ctx_keyword is None:
        if ctx_index is None:
            return lambda args, ctx: fn(*astuple(args))
        if ctx_index == n_pos:
            return lambda args, ctx: fn(*astuple(args), ctx)
        at = ctx_index

        def middle(args: Any, ctx: Any) -> Any:
            values = astuple(args)
            return fn(*values[:at], ctx, *values[at:])
        return middle

    def general(args: Any, ctx: Any) -> Any:
        values = astuple(args)
        pos = list(values[:n_pos])
        if ctx_index is not None:
            pos.insert(ctx_index, ctx)
        kwargs = dict(zip(keyword, values[n_pos:]))
        if ctx_keyword is not None:
            kwargs[ctx_keyword] = ctx
        return fn(*pos, **kwargs)

    return general


async def _finish_async(value: Awaitable[Any], tool: str) -> ToolOutcome:
    return as_outcome(await value, tool)


def as_outcome(value: Any, tool: str) -> ToolOutcome:
    """What a function tool returned, as the outcome the model reads: an outcome as is, a ``str``
    as the result's text, anything else encoded as JSON text (Structs, dicts, lists, numbers,
    ``None`` as ``null``; dict keys sorted).

    Raises
    ------
    PortContractError
        The value is not JSON (msgspec cannot encode it).
    """
    if type(value) is str:
        return ToolResult(content=value)
    if isinstance(value, _OUTCOMES):
        return value
    return _json_result(value, tool)


def _json_result(value: Any, tool: str) -> ToolResult:
    if type(value) is int and _INT_TEXT_LOW < value < _INT_TEXT_BOUND:
        return ToolResult(content=str(value))
    if isinstance(value, str):  # a str subclass: its text, not a JSON string
        return ToolResult(content=str(value))
    try:
        text = _ENCODE(value)
    except (TypeError, ValueError, OverflowError) as exc:
        raise PortContractError(
            f"tool {tool!r} returned {type(value).__name__}, which is not JSON ({exc}); return a "
            "str, a Struct, JSON data or a ToolResult / ToolError / ToolSuspend") from exc
    return ToolResult(content=text.decode())
