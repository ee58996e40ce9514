"""Reads of actions and calls for the console, scoped to a tenant (tenants.access), and
for the REST API's transcript and the follower of its replies (stream.py)."""

from __future__ import annotations

from tandem.chat.models import Message
from tenants.access import NotFound, access_list, access_owned
from tenants.models import Tenant

from .models import TOOL_ROLE, Action, ActionCall


def action_list(*, tenant: Tenant) -> list[Action]:
    return list(access_list(Action, tenant=tenant))


def action_get(*, tenant: Tenant, action_id) -> Action:
    try:
        pk = int(action_id)
    except (TypeError, ValueError):
        raise NotFound("action") from None
    row = access_list(Action, tenant=tenant).filter(pk=pk).first()
    if row is None:
        raise NotFound("action")
    return row


def call_get(*, tenant: Tenant, call_id) -> ActionCall:
    return access_owned(ActionCall.objects.select_related("action", "decided_by"), "action call",
                        tenant=tenant, pk=call_id)


def awaiting_approval(*, tenant: Tenant, conversation_id=None) -> list[ActionCall]:
    rows = access_list(ActionCall, tenant=tenant).filter(status=ActionCall.Status.AWAITING_APPROVAL)
    if conversation_id is not None:
        rows = rows.filter(conversation_id=conversation_id)
    return list(rows.select_related("action", "conversation").order_by("created_at")[:50])


def visitor_lines(*, message_ids: list) -> dict[str, str]:
    """The status line of each call among `message_ids` (call messages), for the
    widget's transcript: a visitor never reads the call itself."""
    return {str(m): line for m, line in ActionCall.objects.filter(message_id__in=message_ids)
            .values_list("message_id", "status_line")}


def continuation_of(*, message_id) -> tuple[str | None, bool]:
    """Of the reply `message_id` that was a call: (its continuation's id, or None while
    there is none; whether it ended without one: the call is settled, its result is in
    the transcript, and the tenant's quota refused the reply after it)."""
    call = ActionCall.objects.filter(message_id=message_id).values(
        "continuation_id", "status", "conversation_id", "message__seq").first()
    if call is None:
        return None, False
    if call["continuation_id"]:
        return str(call["continuation_id"]), False
    settled = call["status"] in ActionCall.FINAL and Message.objects.filter(
        conversation_id=call["conversation_id"], role=TOOL_ROLE, seq__gt=call["message__seq"]).exists()
    return None, settled
