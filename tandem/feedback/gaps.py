"""Knowledge gaps (docs/outcomes.md): the visitor questions the assistant could not
answer, grouped and ranked, most frequent first, for the tenant to write articles for.

A question is unanswered when the reply to it had no source above the tenant's minimum
score (no citation stored while knowledge is on), when the reply got a 👎, or when the
assistant handed the conversation over as `ungrounded`. Questions are grouped by the
retrieval stack's own terms (`knowledge.search.base.query_terms`: its normalisation
and stop words), so two questions that would search for mostly the same words are one
gap. Bounded: the newest `SCAN` unanswered replies and hand-overs of the range."""

from __future__ import annotations

import datetime as dt
from collections import Counter

from knowledge.models import Citation, KnowledgeSettings
from knowledge.search.base import query_terms
from tandem.chat.models import Conversation, Message
from tenants.access import access_list
from tenants.models import Tenant

from .models import Feedback

SCAN = 2000
SAME = 0.5  # Jaccard similarity of two questions' terms at which they are one gap


def _questions(*, tenant: Tenant, start: dt.datetime, end: dt.datetime) -> list[tuple[str, str]]:
    """(question text, why) of each unanswered question in the range, newest first."""
    ks = KnowledgeSettings.objects.filter(tenant=tenant).first()
    grounded = ks.enabled if ks else True
    replies = list(access_list(Message, tenant=tenant).filter(
        role=Message.Role.ASSISTANT, status=Message.Status.DONE, created_at__gte=start, created_at__lt=end)
        .exclude(conversation__visitor_id__startswith="eval:")  # the evaluation harness's own
        .order_by("-created_at").values("id", "conversation_id", "seq")[:SCAN])
    ids = [r["id"] for r in replies]
    cited = set(Citation.objects.filter(tenant=tenant, message_id__in=ids).values_list("message_id", flat=True))
    down = set(Feedback.objects.filter(tenant=tenant, message_id__in=ids, rating=Feedback.Rating.DOWN)
               .values_list("message_id", flat=True))
    missed = [(r, "thumbs_down" if r["id"] in down else "no_source") for r in replies
              if r["id"] in down or (grounded and r["id"] not in cited)]
    handed = list(access_list(Conversation, tenant=tenant).filter(
        handoff_reason="ungrounded", handoff_at__gte=start, handoff_at__lt=end).values("id", "handoff_at")[:SCAN])
    asked = list(Message.objects.filter(
        conversation_id__in={r["conversation_id"] for r, _ in missed} | {c["id"] for c in handed},
        role=Message.Role.USER).values("conversation_id", "seq", "content", "created_at"))
    by_conv: dict = {}
    for m in asked:
        by_conv.setdefault(m["conversation_id"], []).append(m)
    out = []
    for r, why in missed:  # the visitor's message just before the reply
        before = [m for m in by_conv.get(r["conversation_id"], []) if m["seq"] < r["seq"]]
        if before:
            out.append((max(before, key=lambda m: m["seq"])["content"], why))
    for c in handed:  # the visitor's last message before the hand-over
        before = [m for m in by_conv.get(c["id"], []) if m["created_at"] <= c["handoff_at"]]
        if before:
            out.append((max(before, key=lambda m: m["seq"])["content"], "ungrounded"))
    return out


def _similar(a: frozenset, b: frozenset) -> bool:
    return bool(a or b) and len(a & b) / len(a | b) >= SAME


def knowledge_gaps(*, tenant: Tenant, start: dt.date, end: dt.date, limit: int = 20, examples: int = 3) -> list[dict]:
    """[{"question", "count", "examples", "reasons": {why: n}}], most frequent first: the
    range's unanswered questions grouped by their terms. `start`..`end` are UTC days."""
    ks = KnowledgeSettings.objects.filter(tenant=tenant).first()
    language = ks.language if ks else "english"
    begin = dt.datetime.combine(start, dt.time.min, tzinfo=dt.UTC)
    finish = dt.datetime.combine(end + dt.timedelta(days=1), dt.time.min, tzinfo=dt.UTC)
    groups: list[dict] = []
    for text, why in _questions(tenant=tenant, start=begin, end=finish):
        terms = frozenset(query_terms(text, language=language))
        group = next((g for g in groups if _similar(g["terms"], terms)), None)
        if group is None:
            group = {"terms": terms, "texts": Counter(), "reasons": Counter()}
            groups.append(group)
        group["texts"][text.strip()] += 1
        group["reasons"][why] += 1
    ranked = sorted(groups, key=lambda g: -sum(g["texts"].values()))[:limit]
    return [{"question": g["texts"].most_common(1)[0][0], "count": sum(g["texts"].values()),
             "examples": [t for t, _ in g["texts"].most_common(examples)], "reasons": dict(g["reasons"])}
            for g in ranked]
