"""Reads for the agent inbox (its pages: tandem.handoff.views): the tenant's
conversations handed to a person (filtered as the agent asks), how many wait, one
conversation's whole transcript as an agent sees it (internal notes included), and the
name a visitor goes by. Scoped through tenants.access like every read."""

from __future__ import annotations

import hashlib
from datetime import date

from django.db.models import OuterRef, Q, Subquery, TextField, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from tandem.chat import search
from tandem.chat.browsers import browser_in_words
from tandem.chat.models import Conversation, Message, OfflineMessage
from tenants.access import access_list
from tenants.models import Tenant

H = Conversation.Handoff
INBOX_LIMIT = 100

# The inbox's filters, in the order the page shows them; "open" (waiting or with a person)
# is what an agent works through, so it is the default.
VIEWS = {"open": "Open", "mine": "Mine", "unassigned": "Unassigned", "waiting": "Waiting", "resolved": "Resolved"}
DEFAULT_VIEW = "open"

# A visitor who told us nothing is still a person to talk to: "Calm Otter" reads better
# in a queue than a hex id, and the same visitor keeps the same name.
_ADJECTIVES = ("Amber", "Brave", "Calm", "Clever", "Gentle", "Happy", "Jolly", "Kind", "Lucky", "Merry",
               "Quiet", "Rapid", "Sunny", "Swift", "Witty", "Bright")
_ANIMALS = ("Otter", "Falcon", "Panda", "Heron", "Lynx", "Badger", "Koala", "Puffin", "Fox", "Robin",
            "Walrus", "Gecko", "Beaver", "Marten", "Ibis", "Hare")


def visitor_name(conversation: Conversation) -> str:
    """The name the visitor gave (identified users), else their e-mail, else a friendly
    name derived from the visitor id (or the conversation id)."""
    if conversation.user_name:
        return conversation.user_name
    if conversation.user_email:
        return conversation.user_email
    seed = hashlib.sha256((conversation.visitor_id or str(conversation.pk)).encode()).digest()
    return f"{_ADJECTIVES[seed[0] % len(_ADJECTIVES)]} {_ANIMALS[seed[1] % len(_ANIMALS)]}"


def _filtered(qs, *, view: str, agent):
    if view == "mine":
        return qs.filter(handoff=H.HUMAN, assignee_id=getattr(agent, "pk", None))
    if view == "unassigned":
        return qs.filter(handoff__in=[H.PENDING_HUMAN, H.HUMAN], assignee=None)
    if view == "waiting":
        return qs.filter(handoff=H.PENDING_HUMAN)
    if view == "resolved":
        return qs.filter(handoff=H.RESOLVED)
    return qs.filter(handoff__in=[H.PENDING_HUMAN, H.HUMAN])


def _with_last_message(qs):
    """Each conversation with `last`: the visitor's last words; a hand-over from the
    widget's menu adds none, so then the last thing said in it by anyone the visitor
    sees. Two subqueries of the list's one query (the (conversation, seq) index), not
    two queries a row: the list is polled every second."""
    said = (Message.objects.filter(conversation=OuterRef("pk")).exclude(content="")
            .exclude(role__in=[Message.Role.DRAFT, Message.Role.NOTE]).order_by("-seq"))
    return qs.annotate(last=Coalesce(Subquery(said.filter(role=Message.Role.USER).values("content")[:1]),
                                     Subquery(said.values("content")[:1]), Value(""), output_field=TextField()))


def inbox_list(*, tenant: Tenant, agent=None, view: str = DEFAULT_VIEW, q: str = "", label=None,
               since: date | None = None, until: date | None = None) -> list[dict]:
    """The conversations in `view` (one of VIEWS; ValueError otherwise): waiting for a
    person first (longest wait first), then the ones people own; resolved ones newest
    first. Narrowed to those matching the search `q` (tandem.chat.search), carrying
    `label` (one of the tenant's, from tandem.labels) and handed over between `since` and
    `until` (dates, both included). Each with how long it has waited (since it left the
    bot), its last message (or the message the search matched), the visitor's name and
    the conversation's labels."""
    if view not in VIEWS:
        raise ValueError(f"Unknown inbox view {view!r}: choose one of {', '.join(VIEWS)}.")
    qs = _filtered(access_list(Conversation, tenant=tenant), view=view, agent=agent).select_related("assignee")
    if label is not None:
        qs = qs.filter(labels=label)
    if since:
        qs = qs.filter(handoff_at__date__gte=since)
    if until:
        qs = qs.filter(handoff_at__date__lte=until)
    qs = _with_last_message(search.conversations_matching(qs, q))
    qs = qs.order_by("-resolved_at") if view == "resolved" else qs.order_by("handoff_at")
    now = timezone.now()
    out = []
    for c in qs.prefetch_related("labels")[:INBOX_LIMIT]:
        match = getattr(c, "match", None)
        out.append({"conversation": c, "waiting_s": (now - (c.handoff_at or c.updated_at)).total_seconds(),
                    "last": match or c.last, "matched": bool(match), "visitor": visitor_name(c),
                    "labels": list(c.labels.all()), "mine": agent is not None and c.assignee_id == agent.pk})
    if view != "resolved":
        out.sort(key=lambda r: (r["conversation"].handoff != H.PENDING_HUMAN, -r["waiting_s"]))
    return out


def waiting_count(*, tenant: Tenant) -> int:
    """How many conversations wait for a person: the nav's and the page title's count."""
    return access_list(Conversation, tenant=tenant).filter(handoff=H.PENDING_HUMAN).count()


def next_waiting(*, tenant: Tenant, after: Conversation | None = None) -> Conversation | None:
    """The conversation that has waited longest for a person (other than `after`): where
    an agent goes once they resolve one."""
    qs = access_list(Conversation, tenant=tenant).filter(handoff=H.PENDING_HUMAN)
    if after is not None:
        qs = qs.exclude(pk=after.pk)
    return qs.order_by("handoff_at").first()


def offline_list(*, tenant: Tenant, limit: int = 50) -> list[OfflineMessage]:
    """What visitors left in the widget's offline form, newest first."""
    return list(access_list(OfflineMessage, tenant=tenant).select_related("conversation", "answered_by")[:limit])


def inbox_transcript(conversation: Conversation) -> list[Message]:
    return list(conversation.messages.filter(~Q(content="") | Q(role=Message.Role.USER)).exclude(role=Message.Role.DRAFT)
                .select_related("author").prefetch_related("attachments").order_by("seq"))


def handoff_stats(*, tenant: Tenant) -> dict:
    """Hand-overs, median time to the first human reply and to resolve (seconds)."""
    rows = access_list(Conversation, tenant=tenant).exclude(handoff_at=None).values_list(
        "handoff_at", "first_human_reply_at", "resolved_at")
    first = sorted((f - h).total_seconds() for h, f, _ in rows if f and f >= h)
    resolve = sorted((r - h).total_seconds() for h, _, r in rows if r and r >= h)

    def median(v):
        return v[len(v) // 2] if v else None

    return {"handoffs": len(rows), "first_reply_s": median(first), "resolve_s": median(resolve)}


PAST_LIMIT = 10


def visitor_context(conversation: Conversation) -> dict:
    """The side panel beside a conversation: the page the visitor started it from, their
    browser in words, and their other conversations with this tenant (newest first; the
    same verified user on any device, else the same browser's visitor id)."""
    others = access_list(Conversation, tenant=conversation.tenant).exclude(pk=conversation.pk)
    if conversation.user_verified and conversation.user_id:
        others = others.filter(user_verified=True, user_id=conversation.user_id)
    elif conversation.visitor_id:
        others = others.filter(visitor_id=conversation.visitor_id)
    else:
        others = others.none()
    first_words = (Message.objects.filter(conversation=OuterRef("pk"), role=Message.Role.USER).exclude(content="")
                   .order_by("seq").values("content")[:1])
    past = list(others.annotate(first=Subquery(first_words)).order_by("-created_at")[:PAST_LIMIT])
    return {"page_url": conversation.page_url, "browser": browser_in_words(conversation.user_agent),
            "user_agent": conversation.user_agent, "past": past}
