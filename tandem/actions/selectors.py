"""Reads of actions and calls for the console, scoped to a tenant (tenants.access)."""

from __future__ import annotations

from tenants.access import NotFound, access_list, access_owned
from tenants.models import Tenant

from .models import Action, ActionCall


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
