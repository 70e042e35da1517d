"""Approvals: a tool equipped with ``needs_approval`` suspends its call until a person decides.

:func:`pending_approvals` lists what a suspended chat waits on; :func:`approve`, :func:`deny` and
:func:`edit_arguments` make the decisions :func:`~bindloop.agent.resume_chat` ``(decisions=...)``
applies; :func:`approval_token` signs a pending call when the host holds a secret. A second decision
on the same checkpoint raises :class:`ApprovalAlreadyDecidedError`, a decision without the pending
call's token :class:`ApprovalTokenError`. See docs/agent.md.
"""

from ._approvals import (
    ApprovalDecision as ApprovalDecision,
    ApproveCall as ApproveCall,
    DenyCall as DenyCall,
    EditCall as EditCall,
    PendingApproval as PendingApproval,
    approval_token as approval_token,
    approve as approve,
    deny as deny,
    edit_arguments as edit_arguments,
    pending_approvals as pending_approvals,
)
from ._errors import (
    ApprovalAlreadyDecidedError as ApprovalAlreadyDecidedError,
    ApprovalError as ApprovalError,
    ApprovalTokenError as ApprovalTokenError,
)

__all__ = (
    "ApprovalAlreadyDecidedError",
    "ApprovalDecision",
    "ApprovalError",
    "ApprovalTokenError",
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

from .._public import publish as _publish

_publish(__name__, globals(), __all__)
