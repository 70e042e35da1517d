"""``resume_chat``: continue a chat's checkpoint as this generation's prompt — parse it, apply the
reply or commit the approval decisions, then the same tool loop as ``prompt_chat``
(:func:`~bindloop.agent._prompt.drive`), the decided calls its first batch."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..checkpoints import CheckpointReply, CheckpointWake, LoopCheckpoint, apply_checkpoint_input, \
    parse_loop_checkpoint
from ..contracts import Content
from ..errors import UsageError
from ._approvals import ApprovalDecision, check_decisions, commit_decisions, record_of, \
    resumed_calls
from ._prompt import ChatResult, begin_chat, budgets, drive, run_watcher
from ._saves import resumed
from ._stream import StreamHub, with_consumers
from ._turns import ToolChoiceArg

__all__ = ("resume_chat",)


def _apply_reply(cp: LoopCheckpoint, reply: Content, tool_call_id: str | None) -> LoopCheckpoint:
    # The reply answers one open suspend that is not an approval's.
    record = record_of(cp)
    approval_ids = {*record.pending, *(d.call_id for d in record.decided)}
    suspends = [s for s in cp.open_suspends if s.tool_call_id not in approval_ids]
    if tool_call_id is not None and tool_call_id in approval_ids:
        raise UsageError(f"resume_chat(reply=...): call {tool_call_id!r} waits for an "
                         "approval; decide it with decisions=[approve(...)] or deny(...)")
    if tool_call_id is None:
        if len(suspends) != 1:
            raise UsageError(f"resume_chat(reply=...): the checkpoint has {len(suspends)} "
                             "open suspends (approvals aside); name the one you answer with "
                             "tool_call_id=")
        tool_call_id = suspends[0].tool_call_id
    mode = next((s.mode for s in suspends if s.tool_call_id == tool_call_id), None)
    return apply_checkpoint_input(cp, CheckpointWake(tool_call_id=tool_call_id, content=reply)
                                  if mode == "resuming_later" else
                                  CheckpointReply(tool_call_id=tool_call_id, content=reply))


async def resume_chat(checkpoint: LoopCheckpoint | bytes | str | Mapping[str, Any], *,
                      reply: Content | None = None, tool_call_id: str | None = None,
                      max_turn_steps: int | None = None,
                      tool_choice: ToolChoiceArg = None,
                      on_checkpoint: Callable[[LoopCheckpoint], object] | None = None,
                      decisions: Sequence[ApprovalDecision] = (),
                      approval_secret: bytes | str | None = None,
                      ) -> ChatResult:
    """Continue a chat's checkpoint (``ChatResult.checkpoint``, an ``on_checkpoint`` save,
    :attr:`ToolLoopExceededError.checkpoint <bindloop.errors.ToolLoopExceededError>`, or their
    stored bytes) as this generation's prompt, with the generation's equipped tools, validators
    and model: parse it, apply ``reply``, and run the same tool loop as :func:`prompt_chat` from
    that position. ``tool_choice`` is as in :func:`prompt_chat` (the policy's ``turn_index``
    counts this call's turns).

    ``reply`` answers the open suspend (``tool_call_id`` picks one when several are open): a
    ``waiting_for_reply`` suspend gets it as a reply, a ``resuming_later`` one as its wake result
    (text, or content parts such as an MCP tool's answer from ``answer_mcp_input``).
    The checkpoint's ``reask`` record (a chat's own checkpoints carry one) gives the refused
    answers so far, the turns left in the current attempt and in the whole prompt, so the chat
    goes on exactly as it would have uninterrupted. ``max_turn_steps`` replaces that: a fresh
    attempt of ``max_turn_steps`` turns, and as many for each re-ask left. A checkpoint whose
    turns ran out (status ``iteration_limit``) goes on with ``max_turn_steps`` (default 10) more;
    one without a record (another driver's) with the turns it has left (else 10). A refused final
    answer is re-asked as in :func:`prompt_chat`, up to the agent's ``max_retries`` in all
    (:class:`~bindloop.errors.StructuredOutputError` carries every attempt, the recorded ones
    first). ``on_checkpoint`` is as in :func:`prompt_chat`, its revisions following the
    checkpoint's.

    ``decisions`` decide pending approvals (``approve`` / ``deny`` / ``edit_arguments``; the
    pending ones are ``ChatResult.approvals`` or :func:`pending_approvals`). They are committed
    first, through ``on_checkpoint`` (required with decisions), as the next revision; a
    revision-fenced store refusing that save means the checkpoint was decided already:
    :class:`ApprovalAlreadyDecidedError`, and nothing runs. Then the decided calls are the run's
    first batch, in the model's order: an approved call runs once, as any call of the loop does
    (the tool-call-loop middleware, the pool and serial rule, the signal, ``on_tool_error``, the
    stats), a denied one is answered with the reason, and the run goes on; calls still pending
    end it again at once (``waiting_for_reply``, a new checkpoint). With
    ``approval_secret`` (required when the approvals were signed) each decision must carry its
    call's token (:class:`ApprovalTokenError`).
    """
    frame, gen, saver = begin_chat("resume_chat", tool_choice, on_checkpoint, approval_secret)
    if max_turn_steps is not None:
        budgets(max_turn_steps, None, 0)  # the same check as prompt_chat's
    cp = checkpoint if isinstance(checkpoint, LoopCheckpoint) else parse_loop_checkpoint(
        checkpoint)
    start_len = len(cp.messages)  # the reply is part of what this prompt added
    stored_revision = cp.revision
    decided = check_decisions(cp, decisions, approval_secret) if decisions else []
    if decided and saver is None:
        raise UsageError("resume_chat(decisions=...) needs on_checkpoint= (a revision-fenced "
                         "save, such as SqliteStore.save_checkpoint): the decision is committed "
                         "there first, so a second decision on this checkpoint is refused")
    if reply is not None:
        cp = _apply_reply(cp, reply, tool_call_id)
    if cp.status not in ("ready", "iteration_limit") and not cp.open_suspends:
        raise UsageError(f"resume_chat: the checkpoint is {cp.status!r}; only a ready, "
                         "suspended or out-of-turns chat checkpoint can be continued")
    pos = resumed(cp, steps=max_turn_steps, retries=frame.max_retries)
    # The applied reply is not saved on its own: the next save follows the stored revision.
    pos.revision = stored_revision
    commit = None
    if decided:
        assert saver is not None  # checked above
        commit = await commit_decisions(cp, pos, decided, saver, stored_revision)
    live = [d for _, d in decided]
    calls, answers = resumed_calls(pos, cp.messages, live)

    async def body(hub: StreamHub | None) -> ChatResult:
        _, chat = await drive(frame, gen, None, pos, hub=hub, text=None, saver=saver,
                              additional_options=None, start_len=start_len, resuming=True,
                              resume_calls=calls, answers=answers, secret=approval_secret,
                              decided=live, commit=commit)
        assert chat is not None  # without a schema drive always builds the ChatResult
        return chat

    return await with_consumers(frame.run, gen.streams, body, None, gen.consumers,
                                run_watcher(frame, gen))
