"""Chat services: submitting a message (websocket or REST), cancelling a reply, reading
a conversation. Every lookup goes through `tenants.selectors.scope_to_tenant`."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from django.db import transaction

from inference import services as pipeline
from inference.heartbeats import live_workers
from inference.redis_client import get_redis
from inference.requests import RequestSpec, Sampling
from inference.routing import Route, route_for_tenant
from inference.validation import InvalidInput, clean_user_text
from tenants.models import ApiKey, Tenant
from tenants.selectors import scope_to_tenant

from .models import Conversation, Message


class NotFound(Exception):
    def __init__(self, what: str):
        super().__init__(f"No such {what}.")
        self.code = f"{what}_not_found"


@dataclass(frozen=True)
class Submission:
    conversation: Conversation
    assistant_message: Message
    route: Route
    # False when no live worker serves the first tier the request goes to; the client is
    # told the request is queued rather than left waiting in silence.
    served: bool


def conversation_get(*, tenant: Tenant, conversation_id) -> Conversation:
    try:
        pk = uuid.UUID(str(conversation_id))
    except (TypeError, ValueError, AttributeError):
        raise NotFound("conversation") from None
    conv = scope_to_tenant(Conversation.objects.filter(pk=pk), tenant=tenant).first()
    if conv is None:
        raise NotFound("conversation")
    return conv


def message_get(*, tenant: Tenant, message_id) -> Message:
    try:
        pk = uuid.UUID(str(message_id))
    except (TypeError, ValueError, AttributeError):
        raise NotFound("message") from None
    msg = scope_to_tenant(Message.objects.filter(pk=pk), tenant=tenant).first()
    if msg is None:
        raise NotFound("message")
    return msg


def route_is_served(route: Route) -> bool:
    role = "colocated" if route.colocated else "prefill"
    client = get_redis()
    if not live_workers(client, role=role, pool=route.prefill_pool):
        return False
    return route.colocated or bool(live_workers(client, role="decode", pool=route.decode_pool))


def chat_submit(
    *,
    api_key: ApiKey,
    messages: list[tuple[str, str]],
    conversation_id=None,
    channel: str = Conversation.Channel.WIDGET,
    visitor_id: str = "",
    sampling: Sampling | None = None,
) -> Submission:
    """Append `messages` (the last one from the user) to a conversation, create the
    queued assistant message and enqueue the request. Raises InvalidInput or NotFound."""
    tenant = api_key.tenant
    if not messages or messages[-1][0] != Message.Role.USER:
        raise InvalidInput("The last message must be from the user.", param="messages")
    cleaned = [(role, clean_user_text(text)) for role, text in messages]
    quota = tenant.quota
    sampling = sampling or Sampling()
    sampling.max_tokens = min(sampling.max_tokens, quota.max_output_tokens)
    route = route_for_tenant(tenant)
    with transaction.atomic():
        if conversation_id:
            conversation = conversation_get(tenant=tenant, conversation_id=conversation_id)
        else:
            conversation = Conversation.objects.create(tenant=tenant, channel=channel, visitor_id=visitor_id)
        Message.objects.bulk_create(
            [Message(conversation=conversation, role=role, content=text) for role, text in cleaned]
        )
        assistant = Message.objects.create(
            conversation=conversation, role=Message.Role.ASSISTANT, status=Message.Status.QUEUED
        )
        conversation.save(update_fields=["updated_at"])
        spec = RequestSpec(
            request_id=str(assistant.pk), tenant_id=tenant.pk, api_key_id=api_key.pk,
            conversation_id=str(conversation.pk), channel=channel, sampling=sampling,
            priority=route.priority, max_decode_slots=route.max_decode_slots,
            prefill_pool=route.prefill_pool, decode_pool=route.decode_pool, colocated=route.colocated,
        )
        pipeline.request_enqueue(spec=spec)
    return Submission(conversation=conversation, assistant_message=assistant, route=route,
                      served=route_is_served(route))


def chat_cancel(*, tenant: Tenant, message_id) -> Message:
    msg = message_get(tenant=tenant, message_id=message_id)
    if not msg.is_final:
        pipeline.request_cancel(request_id=str(msg.pk))
    return msg
