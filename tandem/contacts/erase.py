"""What deleting conversations takes with it besides their rows (which cascade to
messages, ratings, CSAT, outcomes and offline-form messages): the attachments' files,
the citations of their replies, the webhook events whose bodies quote them (and those
events' deliveries), and, once the transaction commits, their Redis keys (live events,
reply streams, request specs, which hold their text for a while). Usage records stay:
they name a message id and counts, nothing of the person, and the tenant's bill and
quotas are read from them."""

from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction
from django.db.models import Q

from inference.wire import keys
from inference.wire.connections import get_redis
from knowledge.models import Citation
from tandem.attachments.models import Attachment
from tandem.attachments.services import attachments_erase
from tandem.chat.models import Conversation, Message
from tandem.webhooks.models import Event

BATCH = 200


@dataclass
class Erased:
    conversations: int = 0
    messages: int = 0
    attachments: int = 0
    webhook_events: int = 0

    def add(self, other: Erased) -> None:
        self.conversations += other.conversations
        self.messages += other.messages
        self.attachments += other.attachments
        self.webhook_events += other.webhook_events

    def as_dict(self) -> dict:
        return {"conversations": self.conversations, "messages": self.messages, "attachments": self.attachments,
                "webhook_events": self.webhook_events}


def _redis_forget(conversation_ids: list[str], message_ids: list[str]) -> None:
    names = [keys.conversation_events(c) for c in conversation_ids]
    for m in message_ids:
        names += [keys.stream(m), keys.request(m)]
    client = get_redis()
    for i in range(0, len(names), 500):
        client.delete(*names[i:i + 500])


def conversations_erase(*, tenant, conversation_ids) -> Erased:
    """Delete these conversations of `tenant` and everything above, in batches (each its
    own transaction: a purge of many does not hold one long lock)."""
    out = Erased()
    ids = [str(i) for i in conversation_ids]
    for start in range(0, len(ids), BATCH):
        out.add(_erase_batch(tenant, ids[start:start + BATCH]))
    return out


def _erase_batch(tenant, ids: list[str]) -> Erased:
    with transaction.atomic():
        convs = list(Conversation.objects.filter(tenant=tenant, pk__in=ids).values_list("pk", flat=True))
        cids = [str(c) for c in convs]
        mids = [str(m) for m in Message.objects.filter(conversation_id__in=convs).values_list("pk", flat=True)]
        files = attachments_erase(Attachment.objects.filter(tenant=tenant, conversation_id__in=convs))
        Citation.objects.filter(tenant=tenant, message_id__in=mids).delete()
        quoted = Q()
        for c in cids:
            quoted |= Q(body__contains=c)
        events = Event.objects.filter(quoted, tenant=tenant).delete()[1].get("webhooks.Event", 0) if cids else 0
        _, per_model = Conversation.objects.filter(pk__in=convs).delete()
        transaction.on_commit(lambda: _redis_forget(cids, mids))
    return Erased(conversations=len(convs), messages=per_model.get("chat.Message", 0), attachments=files,
                  webhook_events=events)
