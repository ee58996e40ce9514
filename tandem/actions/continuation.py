"""The reply that continues after a call: the call's result (or why it did not run) as a
`tool` message of the transcript, and a new assistant message submitted through the
pipeline like any reply (admitted against the tenant's quotas, its own UsageRecord at
its end: usage counts every pass once). Its prompt is the conversation with the call
and the result in the tool-call format (tandem.api.tool_calls); it is offered the
actions again (`auto`) after a result while rounds remain, else none, so it answers in
text. Runs on the CPU tier's `actions` queue (runner.py)."""

from __future__ import annotations

import logging
import uuid

from django.db import transaction

from inference.pipeline import api as pipeline
from inference.wire.connections import get_redis
from tandem.api import tool_calls
from tandem.chat import services
from tandem.chat.models import Message
from tandem.handoff import events
from tandem.handoff.states import message_event
from tenants.models import Tenant, UsageRecord

from . import conf, lines
from .calls import last_user_seq
from .models import TOOL_ROLE, ActionCall
from .offer import AUTO, NONE, offer_to

S = ActionCall.Status
log = logging.getLogger(__name__)
ANSWER_FROM_RESULT = ("The last message holds the result of an action you called, between <tool_response> tags. "
                      "Answer the visitor's question from it in plain words. Never write the tags or JSON.")


def tool_text(call: ActionCall) -> str:
    return call.result if call.status == S.SUCCEEDED else lines.for_model(call)


def continue_after(*, call_id) -> Message | None:
    """Submit the continuation of a call that ended; None when it already has one (a
    redelivered task), is not final yet, or the tenant's quota refused it (the visitor
    is told, the result stays in the transcript)."""
    with transaction.atomic():
        call = ActionCall.objects.select_for_update().filter(pk=call_id).first()
        if call is None or call.continuation_id or call.status not in ActionCall.FINAL:
            return None
        conv = call.conversation
        tenant = Tenant.objects.select_related("quota").get(pk=conv.tenant_id)
        result = tool_text(call)
        history = services.prompt_history(conv, max_prompt_tokens=tenant.quota.max_prompt_tokens)
        role, content = tool_calls.history_text({"role": "tool", "content": result})
        # Said in words too: a small model otherwise tends to echo the result's tags.
        messages = [{"role": "system", "content": ANSWER_FROM_RESULT}, *history, {"role": role, "content": content}]
        request_id = uuid.uuid4()
        route = pipeline.route_for_tenant(tenant)
        spec = services.request_spec(
            tenant=tenant, route=route, request_id=request_id, conversation_id=conv.pk, channel=conv.channel,
            api_key_id=UsageRecord.objects.filter(message_id=call.message_id).values_list("api_key_id", flat=True)
            .first(), sampling=None, prompt_messages=messages,
            handover={"handover_patterns": pipeline.HANDOVER_OFF})
        more = call.status == S.SUCCEEDED and call.round < conf.max_rounds()
        called = frozenset(ActionCall.objects.filter(conversation=conv, message__seq__gt=last_user_seq(
            conv, call.message)).values_list("name", flat=True))
        offered = offer_to(spec, tenant_id=tenant.pk, choice=AUTO if more else NONE, called=called)
        admission = services.request_admit(spec=spec, tenant=tenant, history=[m["content"] for m in history],
                                           new=[content])

        def write_rows() -> tuple[Message, Message]:
            tool, reply = Message.objects.bulk_create([
                Message(conversation=conv, role=TOOL_ROLE, content=result, author_name=call.name),
                Message(id=request_id, conversation=conv, role=Message.Role.ASSISTANT, status=Message.Status.QUEUED,
                        offered_actions=offered),
            ])
            ActionCall.objects.filter(pk=call.pk).update(continuation=reply)
            return tool, reply

        try:
            tool, reply = services.request_submit(spec=spec, admission=admission, write_rows=write_rows)
        except services.QuotaRefused as exc:
            why = str(exc)
            tool = Message.objects.create(conversation=conv, role=TOOL_ROLE, content=result,
                                          author_name=call.name)
            transaction.on_commit(lambda: _publish(conv.pk, tool, None, refused=why))
            return None
        transaction.on_commit(lambda: _publish(conv.pk, tool, reply))
    return reply


def _publish(conversation_id, tool: Message, reply: Message | None, refused: str = "") -> None:
    client = get_redis()
    events.publish(client, str(conversation_id), message_event(tool), audience=events.AGENTS)
    if reply is not None:
        events.publish(client, str(conversation_id), {"type": "reply", "message": str(reply.pk)})
    else:
        events.publish(client, str(conversation_id), {"type": "action", "message": "", "state": "failed",
                                                      "text": f"The assistant could not continue: {refused}"})
