"""Actions rows for the console's page and IDOR sweeps (tests/console): an action and a
call of it awaiting approval, in `tenant`'s `conversation`."""

from __future__ import annotations

from tandem.actions import services
from tandem.actions.models import ActionCall
from tandem.chat.models import Message


def action_ids(tenant, conversation) -> dict:
    """Made once per tenant (the sweeps ask again for every URL)."""
    made = ActionCall.objects.filter(tenant=tenant).select_related("action").first()
    if made is not None:
        return {"action_id": made.action_id, "call_id": made.pk}
    action = services.action_create(
        tenant=tenant, by=None, name="order_status", description="Look up an order.", method="GET",
        url_template="https://shop.example.com/orders/{order_id}", needs_approval=True,
        parameters={"type": "object", "properties": {"order_id": {"type": "string"}}}).action
    reply = Message.objects.create(conversation=conversation, role="assistant", finish_reason="tool_calls",
                                   content='<tool_call>{"name": "order_status", "arguments": {"order_id": "1"}}'
                                           "</tool_call>")
    call = ActionCall.objects.create(tenant=tenant, conversation=conversation, message=reply, action=action,
                                     name=action.name, arguments={"order_id": "1"},
                                     status=ActionCall.Status.AWAITING_APPROVAL)
    return {"action_id": action.pk, "call_id": call.pk}
