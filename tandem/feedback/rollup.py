"""The outcomes rollup (docs/outcomes.md): each conversation classified and costed from
stored rows (its messages, the usage records of its replies, citations, ratings, CSAT)
into one `ConversationOutcome`, so the console reads small rows instead of scanning
messages on every page view.

`classify` holds the rules; `outcomes_rollup` gathers the facts for the conversations
that may have changed (touched, rated or scored since `since`, not yet rolled up, or
still pending on the 24-hour rule) and upserts their rows. It is idempotent, so the
schedule (tandem.feedback.tasks) and `manage.py outcomes_rollup` may run it at any time."""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from dataclasses import dataclass

from django.db.models import Count, Q
from django.utils import timezone

from knowledge.models import Citation, KnowledgeSettings
from tandem.chat.models import Conversation, Message
from tenants.models import UsageRecord

from .models import ConversationOutcome, Csat, Feedback

Outcome = ConversationOutcome.Outcome
SETTLE = dt.timedelta(hours=24)  # a reply the visitor did not follow up within this resolved their question
BATCH = 500
EVAL_VISITOR = "eval:"  # tandem.evals' conversations: tests of the assistant, not visitors
VISIBLE = (Message.Role.USER, Message.Role.ASSISTANT, Message.Role.AGENT)


@dataclass(frozen=True)
class Facts:
    handoff_reason: str  # "" while the conversation never left the assistant
    resolved: bool  # an agent resolved it
    replies: int  # the assistant's finished replies
    last_is_reply: bool  # the last visible message is one of them
    last_reply_at: dt.datetime | None
    thumbs_down: int


def classify(facts: Facts, *, now: dt.datetime) -> str:
    """The rules of docs/outcomes.md, in order."""
    if facts.resolved:
        return Outcome.HUMAN_RESOLVED
    if facts.handoff_reason:
        return Outcome.HANDED_OVER
    if facts.replies and facts.last_is_reply and not facts.thumbs_down:
        return Outcome.AI_RESOLVED if now - facts.last_reply_at >= SETTLE else Outcome.PENDING
    return Outcome.ABANDONED


def _stale_ids(*, since: dt.datetime, tenant_id=None) -> list:
    rows = Conversation.objects.filter(
        Q(updated_at__gte=since) | Q(outcome__isnull=True) | Q(outcome__outcome=Outcome.PENDING)
        | Q(feedback__updated_at__gte=since) | Q(csat__created_at__gte=since))
    rows = rows.exclude(visitor_id__startswith=EVAL_VISITOR)  # the evaluation harness's own
    if tenant_id is not None:
        rows = rows.filter(tenant_id=tenant_id)
    return list(rows.values_list("pk", flat=True).distinct())


def outcomes_rollup(*, now: dt.datetime | None = None, since: dt.datetime | None = None, tenant_id=None) -> int:
    """Upsert the outcome rows of the conversations that may have changed since `since`
    (default: two days before `now`); how many were written."""
    now = now or timezone.now()
    ids = _stale_ids(since=since or now - 2 * SETTLE, tenant_id=tenant_id)
    for i in range(0, len(ids), BATCH):
        _roll(ids[i:i + BATCH], now=now)
    return len(ids)


def _roll(ids: list, *, now: dt.datetime) -> None:
    convs = list(Conversation.objects.filter(pk__in=ids))
    grounded = dict(KnowledgeSettings.objects.filter(tenant_id__in={c.tenant_id for c in convs})
                    .values_list("tenant_id", "enabled"))
    msgs: dict = defaultdict(list)
    for m in (Message.objects.filter(conversation_id__in=ids, role__in=VISIBLE).order_by("conversation_id", "seq")
              .values("id", "conversation_id", "role", "status", "created_at", "finished_at", "ttft_ms")):
        msgs[m["conversation_id"]].append(m)
    reply_ids = [m["id"] for rows in msgs.values() for m in rows if m["role"] == Message.Role.ASSISTANT]
    usage = {u["message_id"]: u for u in UsageRecord.objects.filter(message_id__in=reply_ids).values(
        "message_id", "prompt_tokens", "completion_tokens", "ttft_ms", "duration_ms", "queue_ms")}
    cited = set(Citation.objects.filter(message_id__in=reply_ids).values_list("message_id", flat=True))
    down = set(Feedback.objects.filter(conversation_id__in=ids, rating=Feedback.Rating.DOWN)
               .values_list("message_id", flat=True))
    thumbs: dict = defaultdict(lambda: {"up": 0, "down": 0})
    for f in Feedback.objects.filter(conversation_id__in=ids).values("conversation_id", "rating").annotate(n=Count("id")):
        thumbs[f["conversation_id"]][f["rating"]] = f["n"]
    csat = {c["conversation_id"]: c for c in Csat.objects.filter(conversation_id__in=ids).values(
        "conversation_id", "score", "answered_by")}
    rows = [_row(c, msgs[c.pk], usage=usage, cited=cited, down=down, grounded=grounded.get(c.tenant_id, True),
                 thumbs=thumbs[c.pk], csat=csat.get(c.pk), now=now) for c in convs]
    ConversationOutcome.objects.bulk_create(
        rows, update_conflicts=True, unique_fields=["conversation"],
        update_fields=[f.name for f in ConversationOutcome._meta.concrete_fields
                       if f.name not in ("id", "conversation", "tenant")])


def _row(c: Conversation, msgs: list[dict], *, usage: dict, cited: set, down: set, grounded: bool, thumbs: dict,
         csat: dict | None, now: dt.datetime) -> ConversationOutcome:
    done = [m for m in msgs if m["role"] == Message.Role.ASSISTANT and m["status"] == Message.Status.DONE]
    last = msgs[-1] if msgs else None
    last_is_reply = bool(last and done and last["id"] == done[-1]["id"])
    facts = Facts(handoff_reason=c.handoff_reason, resolved=c.resolved_at is not None, replies=len(done),
                  last_is_reply=last_is_reply,
                  last_reply_at=(done[-1]["finished_at"] or done[-1]["created_at"]) if done else None,
                  thumbs_down=thumbs["down"])
    spent = [usage[m["id"]] for m in msgs if m["id"] in usage]
    human_ms = None
    if c.first_human_reply_at and c.handoff_at:
        human_ms = max((c.first_human_reply_at - c.handoff_at).total_seconds() * 1000, 0.0)
    return ConversationOutcome(
        tenant_id=c.tenant_id, conversation=c, day=c.created_at.astimezone(dt.UTC).date(),
        outcome=classify(facts, now=now), handoff_reason=c.handoff_reason, ai_involved=bool(done),
        first_ai_response_ms=done[0]["ttft_ms"] if done else None, first_human_response_ms=human_ms,
        replies=len(done),
        unanswered_replies=sum(1 for m in done if m["id"] in down or (grounded and m["id"] not in cited)),
        thumbs_up=thumbs["up"], thumbs_down=thumbs["down"],
        csat_score=csat["score"] if csat else None, csat_answered_by=csat["answered_by"] if csat else "",
        prompt_tokens=sum(u["prompt_tokens"] for u in spent),
        completion_tokens=sum(u["completion_tokens"] for u in spent),
        # Wall time each reply held the tiers (docs/outcomes.md): prefill from the end of
        # its queueing to its first token, decode from there to its end.
        prefill_s=sum(max((u["ttft_ms"] or 0) - (u["queue_ms"] or 0), 0.0) for u in spent) / 1000,
        decode_s=sum(max((u["duration_ms"] or 0) - (u["ttft_ms"] or 0), 0.0) for u in spent) / 1000,
        computed_at=now)
