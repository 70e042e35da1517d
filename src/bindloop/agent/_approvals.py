"""Approvals: a tool equipped with ``needs_approval`` suspends its call (``waiting_for_reply``)
until a person decides; :func:`~bindloop.agent.resume_chat` ``(decisions=...)`` runs the approved
call inside the resumed run, answers a denied one with the reason, and refuses a second decision.

Once only: a decision is committed through ``on_checkpoint`` as the checkpoint's next revision
*before* the call runs. A revision-fenced store (``SqliteStore.save_checkpoint``) refuses a second
commit of the same revision, so a second decision on the same checkpoint — in this process or
another — fails there with :class:`ApprovalAlreadyDecidedError` and nothing runs. A checkpoint
saved after the commit lists the call as decided: resuming it answers the call without running
it again (the effect happened at most once; the model is told it may not have).

Signed approvals: with a secret, each pending call carries a token, HMAC-SHA256 over the RFC 8785
canonical JSON (:func:`bindloop.run.canonical_json_bytes`) of the execution id, the checkpoint
revision, the call id, the tool name and the arguments text; a decision without the token of
that checkpoint is refused with :class:`ApprovalTokenError`.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeAlias

import msgspec

from .._awaitable import resolve
from ..contracts import AssistantMessage, Message, ToolCall, ToolError, ToolOutcome, ToolSuspend
from ..errors import PortContractError, UsageError
from ..run import canonical_json_bytes
from ..checkpoints import ApprovalRecord, DecidedCall, LoopCheckpoint
from ._errors import ApprovalAlreadyDecidedError, ApprovalError, ApprovalTokenError
from ._saves import Position, SaveFn

__all__ = (
    "ApprovalDecision",
    "ApproveCall",
    "DenyCall",
    "EditCall",
    "PendingApproval",
    "approval_token",
    "approve",
    "deny",
    "edit_arguments",
    "pending_approvals",
)

NeedsApproval: TypeAlias = bool | Callable[[Any], bool]
"""``equip_tool(needs_approval=)``: ``True`` for every call, or a predicate given the call's
decoded JSON arguments (a call whose arguments do not decode always needs approval)."""

class PendingApproval(msgspec.Struct, frozen=True, kw_only=True):
    """A call waiting for a decision: its ``call_id``, ``tool`` name and ``arguments`` (the JSON
    text the model sent), and with a secret the ``token`` a decision must carry."""

    call_id: str
    tool: str
    arguments: str
    token: str | None = None


class ApproveCall(msgspec.Struct, frozen=True, kw_only=True, tag_field="decision",
                  tag="approve", omit_defaults=True):
    """Run the call with the model's arguments."""

    call_id: str
    token: str | None = None


class DenyCall(msgspec.Struct, frozen=True, kw_only=True, tag_field="decision", tag="deny",
               omit_defaults=True):
    """Do not run the call; the model reads ``reason`` as its result (a ``denied`` tool error)."""

    call_id: str
    reason: str
    token: str | None = None


class EditCall(msgspec.Struct, frozen=True, kw_only=True, tag_field="decision", tag="edit",
               omit_defaults=True):
    """Run the call with ``arguments`` instead (a JSON object, or its text)."""

    call_id: str
    arguments: dict[str, Any] | str
    token: str | None = None


ApprovalDecision: TypeAlias = ApproveCall | DenyCall | EditCall


def _target(call: PendingApproval | str) -> tuple[str, str | None]:
    if isinstance(call, PendingApproval):
        return call.call_id, call.token
    if isinstance(call, str) and call:
        return call, None
    raise UsageError(f"a decision names a PendingApproval or a call id, got {call!r}")


def approve(call: PendingApproval | str, *, token: str | None = None) -> ApproveCall:
    """Approve ``call`` (a :class:`PendingApproval` brings its own token)."""
    call_id, own = _target(call)
    return ApproveCall(call_id=call_id, token=token if token is not None else own)


def deny(call: PendingApproval | str, reason: str, *, token: str | None = None) -> DenyCall:
    """Deny ``call``; the model reads ``reason``."""
    if not isinstance(reason, str) or not reason:
        raise UsageError(f"deny(): the reason the model reads must be a non-empty string, "
                         f"got {reason!r}")
    call_id, own = _target(call)
    return DenyCall(call_id=call_id, reason=reason, token=token if token is not None else own)


def edit_arguments(call: PendingApproval | str, arguments: Mapping[str, Any] | str, *,
                   token: str | None = None) -> EditCall:
    """Approve ``call`` with ``arguments`` in place of the model's."""
    call_id, own = _target(call)
    args: dict[str, Any] | str = arguments if isinstance(arguments, str) else dict(arguments)
    return EditCall(call_id=call_id, arguments=args, token=token if token is not None else own)


def _secret(secret: object) -> bytes:
    if isinstance(secret, str) and secret:
        return secret.encode()
    if isinstance(secret, (bytes, bytearray)) and secret:
        return bytes(secret)
    raise UsageError("approval_secret must be non-empty bytes or str")


def approval_token(secret: bytes | str, *, execution_id: str, revision: int, call_id: str,
                   tool: str, arguments: str) -> str:
    """The hex HMAC-SHA256, under ``secret``, of the RFC 8785 canonical JSON of the five fields."""
    body = canonical_json_bytes({"arguments": arguments, "call_id": call_id,
                                 "execution_id": execution_id, "revision": revision,
                                 "tool": tool})
    return hmac.new(_secret(secret), body, hashlib.sha256).hexdigest()


def last_calls(messages: Sequence[Message]) -> dict[str, ToolCall]:
    """The calls of the transcript's last tool-call turn, by id (where every open suspend is)."""
    for m in reversed(messages):
        if isinstance(m, AssistantMessage) and m.tool_calls:
            return {c.id: c for c in m.tool_calls}
    return {}


def record_of(cp: LoopCheckpoint) -> ApprovalRecord:
    return cp.approvals if isinstance(cp.approvals, ApprovalRecord) else ApprovalRecord()


def pending_approvals(checkpoint: LoopCheckpoint, *,
                      secret: bytes | str | None = None) -> tuple[PendingApproval, ...]:
    """The calls of ``checkpoint`` waiting for a decision, in the model's order; with ``secret``
    each carries the token a decision on this checkpoint must bring."""
    if not isinstance(checkpoint, LoopCheckpoint):
        raise UsageError(f"pending_approvals() takes a LoopCheckpoint, got "
                         f"{type(checkpoint).__name__}")
    pending = set(record_of(checkpoint).pending)
    out = []
    for call in last_calls(checkpoint.messages).values():
        if call.id in pending:
            token = None if secret is None else approval_token(
                secret, execution_id=checkpoint.execution_id, revision=checkpoint.revision,
                call_id=call.id, tool=call.name, arguments=call.arguments)
            out.append(PendingApproval(call_id=call.id, tool=call.name, arguments=call.arguments,
                                       token=token))
    return tuple(out)


def needs_approval(rule: NeedsApproval, call: ToolCall) -> bool:
    """Whether ``call`` waits for a decision under ``rule`` (``equip_tool`` checked its type)."""
    if rule is True:
        return True
    try:
        args = msgspec.json.decode(call.arguments)
    except msgspec.DecodeError:
        return True  # nothing to judge: ask
    verdict = rule(args)  # type: ignore[operator]
    if not isinstance(verdict, bool):
        raise PortContractError(f"equip_tool(needs_approval=...) for {call.name!r} returned "
                                f"{type(verdict).__name__}, not a bool")
    return verdict


def check_decisions(cp: LoopCheckpoint, decisions: Sequence[object],
                    secret: bytes | str | None) -> list[tuple[ToolCall, DecidedCall]]:
    """The decisions checked against ``cp`` (the call pending, each named once, the token valid
    when the record is signed or a secret is given), in the model's call order."""
    record = record_of(cp)
    pending = set(record.pending)
    decided = {d.call_id for d in record.decided}
    calls = last_calls(cp.messages)
    answered = set(calls) - {s.tool_call_id for s in cp.open_suspends}
    if record.signed and secret is None:
        raise ApprovalTokenError("this checkpoint's approvals are signed: pass approval_secret= "
                                 "so the decisions' tokens can be checked")
    chosen: dict[str, DecidedCall] = {}
    for d in decisions:
        if not isinstance(d, (ApproveCall, DenyCall, EditCall)):
            raise UsageError(f"resume_chat(decisions=...): {d!r} is not a decision; make one "
                             "with approve(), deny() or edit_arguments()")
        cid = d.call_id
        if cid in chosen:
            raise UsageError(f"resume_chat(decisions=...): call {cid!r} is decided twice")
        if cid in decided or (cid in answered and cid not in pending):
            raise ApprovalAlreadyDecidedError(
                f"call {cid!r} of execution {cp.execution_id!r} was decided already; it does "
                "not run again", (cid,))
        if cid not in pending:
            raise ApprovalError(f"call {cid!r} is not waiting for approval in checkpoint "
                                f"{cp.execution_id!r} revision {cp.revision} (pending: "
                                f"{sorted(pending)})")
        call = calls[cid]
        if secret is not None:
            want = approval_token(secret, execution_id=cp.execution_id, revision=cp.revision,
                                  call_id=cid, tool=call.name, arguments=call.arguments)
            if not isinstance(d.token, str) or not hmac.compare_digest(d.token, want):
                raise ApprovalTokenError(
                    f"the decision on call {cid!r} carries no valid token for checkpoint "
                    f"{cp.execution_id!r} revision {cp.revision}")
        if isinstance(d, DenyCall):
            if not isinstance(d.reason, str) or not d.reason:
                raise UsageError(f"the denial of call {cid!r} needs a non-empty reason")
            chosen[cid] = DecidedCall(call_id=cid, decision="deny", reason=d.reason)
        elif isinstance(d, EditCall):
            chosen[cid] = DecidedCall(call_id=cid, decision="approve",
                                      arguments=_arguments_text(cid, d.arguments))
        else:
            chosen[cid] = DecidedCall(call_id=cid, decision="approve", arguments=call.arguments)
    return [(calls[c], chosen[c]) for c in calls if c in chosen]


def _arguments_text(call_id: str, arguments: object) -> str:
    if isinstance(arguments, str):
        try:
            value = msgspec.json.decode(arguments)
        except msgspec.DecodeError as exc:
            raise UsageError(f"the edited arguments of call {call_id!r} are not JSON: "
                             f"{exc}") from exc
    else:
        value = arguments
    if not isinstance(value, dict):
        raise UsageError(f"the edited arguments of call {call_id!r} must be a JSON object")
    return msgspec.json.encode(value).decode()


def is_conflict(exc: BaseException) -> bool:
    """A store's revision-fence refusal (``CheckpointConflictError``: a usage error naming the
    refused ``revision`` and the ``stored`` one), told apart from any other failure to save."""
    return isinstance(exc, UsageError) and isinstance(getattr(exc, "revision", None), int) \
        and isinstance(getattr(exc, "stored", None), int)


_LOST = ("approved, but the run stopped while this call was running: it may or may not have "
         "taken effect, and it was not run again")


class ApprovalGate:
    """The approval layer of a prompt's batch port, between the tool-call-loop middleware and the
    loop's runner: what it answers itself never runs (so the loop neither counts nor reports it).

    A call of a gated tool (``rules``: tool name -> ``needs_approval``) that needs approval is
    answered with a ``waiting_for_reply`` suspend (its id joins ``awaiting``). A resumed call is
    answered by its decision (``answers``): ``None`` lets an approved one through to the runner,
    once; a denial or a decision an interrupted invocation left is answered with its tool error."""

    __slots__ = ("answers", "awaiting", "rules")

    def __init__(self, rules: Mapping[str, NeedsApproval],
                 answers: Mapping[str, ToolOutcome | None]) -> None:
        self.rules = rules
        self.answers = dict(answers)
        self.awaiting: list[str] = []  # call ids suspended for a decision, in call order

    def split(self, calls: Sequence[ToolCall]) -> tuple[dict[str, ToolOutcome], list[ToolCall]]:
        """What the gate answers (by call id), and the calls left for the runner, in order."""
        answered: dict[str, ToolOutcome] = {}
        run: list[ToolCall] = []
        rules, answers = self.rules, self.answers
        for call in calls:
            if call.id in answers:
                outcome = answers.pop(call.id)  # a decision answers its call once
                if outcome is None:
                    run.append(call)
                else:
                    answered[call.id] = outcome
            elif call.name in rules and needs_approval(rules[call.name], call):
                self.awaiting.append(call.id)
                answered[call.id] = ToolSuspend(mode="waiting_for_reply",
                                                detail=f"approval required: {call.name}")
            else:
                run.append(call)
        return answered, run


def resumed_calls(pos: Position, messages: Sequence[Message],
                  live: Sequence[DecidedCall]) -> tuple[tuple[ToolCall, ...],
                                                       dict[str, ToolOutcome | None]]:
    """The decided calls the resumed run begins with (``ToolLoopParams.resume_calls``, in the
    model's order; an edit's arguments in place of the model's) and the gate's answers for them.

    ``live`` are this invocation's decisions: an approved one runs. The ones an earlier,
    interrupted invocation committed (``pos.approvals_decided`` beyond ``live``) are answered
    without running: the call may have run already. The position forgets them all: once the batch
    is in, no checkpoint lists them as decided."""
    running = {d.call_id for d in live}
    decided = {d.call_id: d for d in pos.approvals_decided}
    pos.approvals_decided = ()
    calls: list[ToolCall] = []
    answers: dict[str, ToolOutcome | None] = {}
    for call in last_calls(messages).values():
        d = decided.get(call.id)
        if d is None:
            continue
        if d.decision == "deny":
            answers[call.id] = ToolError(error=d.reason or "denied", kind="denied")
        elif call.id not in running:
            answers[call.id] = ToolError(error=_LOST, kind="error")
        else:
            answers[call.id] = None
            if d.arguments is not None:
                call = ToolCall(id=call.id, name=call.name, arguments=d.arguments)
        calls.append(call)
    return tuple(calls), answers


async def commit_decisions(cp: LoopCheckpoint, pos: Position,
                           decided: Sequence[tuple[ToolCall, DecidedCall]],
                           saver: SaveFn, stored_revision: int) -> LoopCheckpoint:
    """Commit ``decided`` as the position's next revision through ``saver`` before anything runs
    and return the checkpoint saved; a revision-fenced store's refusal is
    :class:`ApprovalAlreadyDecidedError`."""
    now = {d.call_id for _, d in decided}
    pos.approvals_pending = tuple(c for c in pos.approvals_pending if c not in now)
    pos.approvals_decided = (*pos.approvals_decided, *(d for _, d in decided))
    commit = pos.checkpoint("waiting_for_reply")  # the calls are still open
    try:
        await resolve(saver(commit))
        return commit
    except Exception as exc:
        if is_conflict(exc):
            ids = tuple(sorted(now))
            raise ApprovalAlreadyDecidedError(
                f"execution {cp.execution_id!r} revision {stored_revision} was decided already "
                f"(the store holds a later revision); calls {list(ids)} do not run again",
                ids) from exc
        raise


def note_suspended(pos: Position, gate: ApprovalGate | None, secret: bytes | str | None) -> None:
    """After a suspend: the position's pending approvals are the open suspends the gate asked for
    now or that were pending before (once signed, a suspension's approvals stay signed)."""
    open_ids = {s.tool_call_id for s in pos.state.open_suspends}
    asked = set(gate.awaiting) if gate is not None else set()
    pos.approvals_pending = tuple(
        c for c in last_calls(pos.state.messages)
        if c in open_ids and (c in asked or c in pos.approvals_pending))
    if asked:
        pos.approvals_signed = pos.approvals_signed or secret is not None


def check_secret(secret: object) -> None:
    """``approval_secret=`` checked: non-empty bytes or str."""
    _secret(secret)
