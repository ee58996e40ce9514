"""Reads for the agent inbox (the console's tandem.console.views.inbox): the tenant's
conversations handed to a person, and one conversation's whole transcript as an agent
sees it (internal notes included). Scoped through tenants.access like every read."""

from __future__ import annotations

from django.db.models import Q
from django.utils import timezone

from tenants.access import access_list
from tenants.models import Tenant

from .models import Conversation, Message, OfflineMessage

H = Conversation.Handoff
INBOX_LIMIT = 100


def inbox_list(*, tenant: Tenant, agent=None) -> list[dict]:
    """Waiting for a person (oldest wait first), then the ones people own; each with
    how long it has waited (since it left the bot) and its last visitor message."""
    rows = (access_list(Conversation, tenant=tenant).filter(handoff__in=[H.PENDING_HUMAN, H.HUMAN])
            .select_related("assignee").order_by("handoff_at")[:INBOX_LIMIT])
    now = timezone.now()
    out = []
    for c in rows:
        last = (c.messages.filter(role=Message.Role.USER).order_by("-seq")
                .values_list("content", flat=True).first())
        out.append({"conversation": c, "waiting_s": (now - (c.handoff_at or c.updated_at)).total_seconds(),
                    "last": last or "", "mine": agent is not None and c.assignee_id == agent.pk})
    out.sort(key=lambda r: (r["conversation"].handoff != H.PENDING_HUMAN, -r["waiting_s"]))
    return out


def offline_list(*, tenant: Tenant, limit: int = 50) -> list[OfflineMessage]:
    """What visitors left in the widget's offline form, newest first."""
    return list(access_list(OfflineMessage, tenant=tenant).select_related("conversation", "answered_by")[:limit])


def inbox_transcript(conversation: Conversation) -> list[Message]:
    return list(conversation.messages.filter(~Q(content="") | Q(role=Message.Role.USER)).exclude(role=Message.Role.DRAFT)
                .select_related("author").order_by("seq"))


def handoff_stats(*, tenant: Tenant) -> dict:
    """Hand-overs, median time to the first human reply and to resolve (seconds)."""
    rows = access_list(Conversation, tenant=tenant).exclude(handoff_at=None).values_list(
        "handoff_at", "first_human_reply_at", "resolved_at")
    first = sorted((f - h).total_seconds() for h, f, _ in rows if f and f >= h)
    resolve = sorted((r - h).total_seconds() for h, _, r in rows if r and r >= h)

    def median(v):
        return v[len(v) // 2] if v else None

    return {"handoffs": len(rows), "first_reply_s": median(first), "resolve_s": median(resolve)}
