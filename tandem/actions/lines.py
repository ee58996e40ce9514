"""What the visitor reads of a call (a short status line; agents see the call and its
result in the transcript), and what the model is told of one that did not run."""

from __future__ import annotations

from .models import ActionCall

S = ActionCall.Status
CHECKING = "A person is checking this request…"
NEEDS_VERIFIED = "This needs you to be signed in to the site. Please sign in and ask again."
DENIED = "A person declined this request."
FAILED = "That did not work; the assistant will tell you more."
NOT_AVAILABLE = "That is not available here."


def for_model(call: ActionCall) -> str:
    """The `tool` message's text for a call that ended without a result."""
    if call.status == S.DENIED:
        return "Refused: a person of the support team declined this action. Tell the visitor it was not done."
    if call.status == S.REFUSED:
        return f"Refused: {call.error}. Tell the visitor it was not done."
    return f"Failed: {call.error}. Tell the visitor it could not be done now."
