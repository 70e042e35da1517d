"""User input a 2026-07-28 call asked for, kept in the run's checkpoint (Multi Round-Trip Requests).

A 2026-07-28 server that needs the user answers a ``tools/call`` with ``input_required`` and holds
nothing open: everything it needs to go on is in the ``requestState`` it hands the client. So,
unlike a legacy server's ``elicitation/create`` (bound to a live stream), the question can wait
for as long as the user takes, in another process: with
``PendingElicitations(durable=True)`` as the elicitation port, the tool call ends in a
:class:`~bindloop.contracts.ToolSuspend` whose ``state`` is a :class:`PendingMcpInput` (the call,
the server's input requests and its ``requestState``), which the loop keeps with the open suspend
in the checkpoint. Any process holding that checkpoint lists it with :func:`pending_mcp_inputs`,
and :func:`answer_mcp_input` re-issues the call, once, with the user's answers as
``inputResponses`` and the ``requestState`` as received (inputs other than elicitation, such as
sampling, are answered then through the client's own ports); its outcome is the suspended call's
answer (``resume_chat(checkpoint, reply=..., tool_call_id=...)``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import msgspec

from ..contracts import ToolError, ToolResult
from ..errors import UsageError
from ._elicit import ElicitationRequest, ElicitationResult
from ._errors import McpInputPending
from ._pending import PendingElicitation, PendingElicitations, checked_content

if TYPE_CHECKING:
    from ..checkpoints import LoopCheckpoint
    from ._http import McpHttpClient
    from ._serve import ServerRequestHandlers

__all__ = (
    "PendingMcpInput",
    "answer_mcp_input",
    "claim_mcp_input",
    "defers_input",
    "pending_mcp_inputs",
)

_TAG = "mcp-input"
_PREFIX = '{"kind":"mcp-input"'
_MAX_STATE = 1024 * 1024  # an open suspend's state text this module will decode


class PendingMcpInput(msgspec.Struct, frozen=True, kw_only=True, tag_field="kind", tag=_TAG,
                      omit_defaults=True):
    """A 2026-07-28 ``tools/call`` waiting for the user: the ``server`` (the client's name for
    it), the MCP ``tool`` and its ``arguments`` as sent, the server's ``input_requests`` by key
    (``{"method": ..., "params": ...}``) and its opaque ``request_state``. ``tool_call_id`` is the
    suspended loop call's id (set by :func:`pending_mcp_inputs`); ``claimed`` says a process
    took it to answer (:func:`claim_mcp_input`)."""

    server: str
    tool: str
    arguments: dict[str, Any]
    input_requests: dict[str, Any]
    request_state: str | None = None
    tool_call_id: str | None = None
    claimed: bool = False

    def elicitations(self) -> tuple[PendingElicitation, ...]:
        """The questions for the user, one per elicitation input; each ``id`` is its input key
        (the key :func:`answer_mcp_input` takes its answer under)."""
        out: list[PendingElicitation] = []
        for key, request in self.input_requests.items():
            asked = _elicitation(request)
            if asked is not None:
                out.append(PendingElicitation(
                    id=key, server=self.server, tool=self.tool, agent=None,
                    message=asked.message, mode=asked.mode,
                    requested_schema=asked.requested_schema, url=asked.url,
                    elicitation_id=asked.elicitation_id))
        return tuple(out)

    def question(self) -> str:
        """The elicitations' messages, one per line (the suspend's ``detail``)."""
        return "\n".join(e.message for e in self.elicitations()) or f"{self.tool} needs input"


_ENCODER = msgspec.json.Encoder()
_DECODER = msgspec.json.Decoder(PendingMcpInput)


def encode_pending(pending: PendingMcpInput) -> str:
    """The text a suspend keeps (``ToolSuspend.state``): the entry without its call id."""
    return _ENCODER.encode(msgspec.structs.replace(pending, tool_call_id=None)).decode()


def _elicitation(request: object) -> ElicitationRequest | None:
    if not isinstance(request, dict) or request.get("method") != "elicitation/create":
        return None
    try:
        return msgspec.convert(request.get("params"), ElicitationRequest)
    except msgspec.ValidationError:
        return None


def defers_input(handlers: ServerRequestHandlers, input_requests: Mapping[str, Any]) -> bool:
    """Whether an ``input_required`` round is kept for later: one of its elicitations goes to a
    ``PendingElicitations(durable=True)`` port."""
    for request in input_requests.values():
        asked = _elicitation(request)
        if asked is None:
            continue
        port = handlers.url_elicitation if asked.mode == "url" else handlers.elicitation
        if isinstance(port, PendingElicitations) and port.durable:
            return True
    return False


class _HasSuspends(Protocol):
    @property
    def open_suspends(self) -> Sequence[Any]: ...


def pending_mcp_inputs(checkpoint: _HasSuspends) -> tuple[PendingMcpInput, ...]:
    """The MCP inputs a checkpoint (a :class:`~bindloop.checkpoints.LoopCheckpoint`, or anything
    with its ``open_suspends``) waits on, each with its ``tool_call_id``; other suspends are
    left out.

    Raises
    ------
    UsageError
        An open suspend carries an MCP input that does not decode (a damaged checkpoint).
    """
    out: list[PendingMcpInput] = []
    for suspend in checkpoint.open_suspends:
        state = getattr(suspend, "state", None)
        if not isinstance(state, str) or not state.startswith(_PREFIX):
            continue
        if len(state) > _MAX_STATE:
            raise UsageError(f"open suspend {suspend.tool_call_id!r}: its MCP input is over "
                             f"{_MAX_STATE} characters")
        try:
            entry = _DECODER.decode(state)
        except (msgspec.DecodeError, msgspec.ValidationError):
            raise UsageError(f"open suspend {suspend.tool_call_id!r} holds an MCP input that "
                             "does not decode (a damaged checkpoint)") from None
        out.append(msgspec.structs.replace(entry, tool_call_id=suspend.tool_call_id))
    return tuple(out)


def claim_mcp_input(checkpoint: LoopCheckpoint, pending: PendingMcpInput) -> LoopCheckpoint:
    """``checkpoint`` (a :class:`~bindloop.checkpoints.LoopCheckpoint`) one revision on, with
    ``pending``'s entry marked ``claimed``: save it with a revision-fenced store (such as
    ``SqliteStore.save_checkpoint``) *before* :func:`answer_mcp_input`, so of two processes
    answering the same stored checkpoint only the first to save re-issues the call; resume from
    the claimed checkpoint. A process that dies between the claim and the resume leaves the entry
    claimed and the call not re-issued by anyone else (at most once).

    Raises
    ------
    UsageError
        ``checkpoint`` is not a LoopCheckpoint, has no such open suspend, or it is claimed already.
    """
    from ..checkpoints import LoopCheckpoint as Checkpoint  # the checkpoint type, on first use only

    if not isinstance(checkpoint, Checkpoint):
        raise UsageError(f"claim_mcp_input() takes a LoopCheckpoint, got "
                         f"{type(checkpoint).__name__}")
    current = {p.tool_call_id: p for p in pending_mcp_inputs(checkpoint)}
    held = current.get(pending.tool_call_id)
    if held is None:
        raise UsageError(f"the checkpoint has no MCP input for call {pending.tool_call_id!r}")
    if held.claimed:
        raise UsageError(f"the MCP input of call {pending.tool_call_id!r} is claimed already")
    state = encode_pending(msgspec.structs.replace(held, claimed=True))
    suspends = tuple(msgspec.structs.replace(s, state=state)
                     if s.tool_call_id == pending.tool_call_id else s
                     for s in checkpoint.open_suspends)
    return msgspec.structs.replace(checkpoint, revision=checkpoint.revision + 1,
                                   open_suspends=suspends)


async def answer_mcp_input(client: McpHttpClient, pending: PendingMcpInput,
                           answers: Mapping[str, ElicitationResult]) -> ToolResult | ToolError:
    """Re-issue ``pending``'s call once with ``answers`` (an :class:`ElicitationResult` per
    elicitation key, see :meth:`PendingMcpInput.elicitations`) as ``inputResponses`` and the
    server's ``requestState`` as received; the other inputs (sampling, roots) are answered
    through ``client``'s handlers. Returns the outcome the MCP tool would have returned (its
    answer for the suspended call). Accepted form content gets the schema's defaults and is
    checked against it before anything is sent.

    Raises
    ------
    UsageError
        ``client`` is another server's; an elicitation has no answer, or an answer names no
        elicitation.
    ElicitationContentError
        Accepted content breaks its requested schema (nothing was sent).
    McpInputPending
        The server asked for more input again (a new entry, same ``tool_call_id``).
    McpError
        As for every call (the server, the connection, the credentials).
    """
    if pending.server != client.server:
        raise UsageError(f"this input is for MCP server {pending.server!r}; the client given is "
                         f"{client.server!r}")
    wanted = {e.id: e for e in pending.elicitations()}
    missing = sorted(set(wanted) - set(answers))
    unknown = sorted(set(answers) - set(wanted))
    if missing or unknown:
        raise UsageError(f"answer_mcp_input: answers are missing for {missing} and name no "
                         f"elicitation: {unknown}" if missing and unknown else
                         f"answer_mcp_input: no answer for {missing}" if missing else
                         f"answer_mcp_input: no elicitation named {unknown}")
    responses: dict[str, Any] = {}
    for key, request in pending.input_requests.items():
        entry = wanted.get(key)
        if entry is None:
            responses[key] = await client._input_response("tools/call", key, request)
            continue
        answer = answers[key]
        if not isinstance(answer, ElicitationResult):
            raise UsageError(f"answer {key!r} must be an ElicitationResult")
        if answer.action == "accept" and entry.mode != "url":
            answer = ElicitationResult(action="accept",
                                       content=checked_content(entry, answer.content))
        elif answer.action == "accept":
            answer = ElicitationResult(action="accept")
        responses[key] = msgspec.to_builtins(answer)
    extra: dict[str, Any] = {"inputResponses": responses}
    if pending.request_state is not None:
        extra["requestState"] = pending.request_state
    from ._tools import call_outcome  # the tools' one mapping of a result

    try:
        result = await client._call_tool(pending.tool, pending.arguments, first=extra)
    except McpInputPending as again:
        raise McpInputPending(msgspec.structs.replace(
            again.pending, tool_call_id=pending.tool_call_id)) from None
    return call_outcome(client, pending.tool, result)
