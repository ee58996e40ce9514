"""Outcomes (docs/outcomes.md): conversations built in the database, one per rule, are
classified by the rollup as the rules say; the report's figures equal a direct count of
the stored rows; the rollup is idempotent and sees a later 👎; and the console's page and
CSV are the tenant's alone."""

from __future__ import annotations

import datetime as dt
import uuid

import pytest
from django.utils import timezone

from knowledge.models import Citation, KnowledgeSettings
from tandem.chat.models import Conversation, Message
from tandem.feedback import report
from tandem.feedback.models import ConversationOutcome, Csat, Feedback
from tandem.feedback.rollup import outcomes_rollup
from tenants.models import Membership, UsageRecord
from tests.console.conftest import user
from tests.factories import make_tenant

pytestmark = pytest.mark.django_db
LATER = dt.timedelta(hours=25)  # past the 24-hour rule


def build(tenant, *turns, **conv) -> Conversation:
    """A widget conversation of `turns`: "user", "reply" (a finished assistant reply with
    its usage record), "failed" (a reply that failed) or "agent"."""
    c = Conversation.objects.create(tenant=tenant, channel="widget", visitor_id=f"v-{uuid.uuid4().hex[:6]}", **conv)
    for turn in turns:
        if turn == "user":
            Message.objects.create(conversation=c, role="user", content="Can I return boots?")
        elif turn == "agent":
            Message.objects.create(conversation=c, role="agent", content="Yes.", author_name="Ana")
        else:
            m = Message.objects.create(conversation=c, role="assistant", content="Within 30 days.",
                                       status="done" if turn == "reply" else "failed", ttft_ms=120.0,
                                       finished_at=timezone.now())
            UsageRecord.objects.create(tenant=tenant, message_id=m.pk, prompt_tokens=100, completion_tokens=20,
                                       ttft_ms=150.0, queue_ms=30.0, duration_ms=650.0)
    return c


def reply_of(c: Conversation) -> Message:
    return c.messages.filter(role="assistant").order_by("seq").last()


def outcome(c: Conversation) -> ConversationOutcome:
    return ConversationOutcome.objects.get(conversation=c)


def test_each_rule_classifies_its_constructed_conversation():
    t = make_tenant().tenant
    now = timezone.now()
    resolved = build(t, "user", "reply", "user", "agent", handoff="resolved", handoff_reason="button",
                     handoff_at=now, first_human_reply_at=now + dt.timedelta(seconds=90), resolved_at=now)
    handed = build(t, "user", "reply", "user", handoff="pending_human", handoff_reason="words", handoff_at=now)
    ungrounded = build(t, "user", handoff="pending_human", handoff_reason="ungrounded", handoff_at=now)
    ai = build(t, "user", "reply")
    thumbs_down = build(t, "user", "reply")
    Feedback.objects.create(tenant=t, conversation=thumbs_down, message=reply_of(thumbs_down), rater="x",
                            rating="down")
    came_back = build(t, "user", "reply", "user")
    failed = build(t, "user", "failed")
    unanswered = build(t, "user")

    outcomes_rollup(now=now + LATER)
    assert outcome(resolved).outcome == "human_resolved"
    assert outcome(resolved).first_human_response_ms == pytest.approx(90_000)
    assert (outcome(handed).outcome, outcome(handed).handoff_reason) == ("handed_over", "words")
    assert (outcome(ungrounded).outcome, outcome(ungrounded).handoff_reason) == ("handed_over", "ungrounded")
    assert outcome(ai).outcome == "ai_resolved"
    assert outcome(thumbs_down).outcome == "abandoned"
    assert outcome(came_back).outcome == "abandoned"
    assert outcome(failed).outcome == "abandoned" and not outcome(failed).ai_involved
    assert outcome(unanswered).outcome == "abandoned" and not outcome(unanswered).ai_involved

    # Less than 24 hours after its reply, the assistant's conversation is not decided yet.
    outcomes_rollup(now=now)
    assert outcome(ai).outcome == "pending"


def test_the_rollup_is_idempotent_and_sees_a_later_thumbs_down():
    t = make_tenant().tenant
    c = build(t, "user", "reply")
    later = timezone.now() + LATER
    outcomes_rollup(now=later)
    outcomes_rollup(now=later)
    assert ConversationOutcome.objects.filter(conversation=c).count() == 1
    assert outcome(c).outcome == "ai_resolved"
    Feedback.objects.create(tenant=t, conversation=c, message=reply_of(c), rater="visitor:v", rating="down")
    outcomes_rollup(now=later)
    assert (outcome(c).outcome, outcome(c).thumbs_down) == ("abandoned", 1)


def test_the_report_matches_a_direct_count_of_the_stored_rows():
    t, other = make_tenant().tenant, make_tenant().tenant
    KnowledgeSettings.objects.create(tenant=t, enabled=True)
    now = timezone.now()
    convs = [build(t, "user", "reply") for _ in range(3)]
    convs += [build(t, "user", "reply", "user", "reply")]
    convs += [build(t, "user", "reply", "user", "agent", handoff="resolved", handoff_reason="agent",
                    handoff_at=now, first_human_reply_at=now + dt.timedelta(seconds=30), resolved_at=now)]
    convs += [build(t, "user")]
    build(other, "user", "reply")  # another tenant's: never counted
    Citation.objects.create(tenant=t, message_id=reply_of(convs[0]).pk, rank=0, title="Returns", score=0.9)
    Feedback.objects.create(tenant=t, conversation=convs[1], message=reply_of(convs[1]), rater="a", rating="up")
    Feedback.objects.create(tenant=t, conversation=convs[2], message=reply_of(convs[2]), rater="a", rating="down")
    Csat.objects.create(tenant=t, conversation=convs[0], score=5, answered_by="ai", rater="a")
    Csat.objects.create(tenant=t, conversation=convs[3], score=2, answered_by="ai", rater="a")
    Csat.objects.create(tenant=t, conversation=convs[4], score=4, answered_by="human", rater="a")
    outcomes_rollup(now=now + LATER)
    today = now.astimezone(dt.UTC).date()
    total = report.outcomes_report(tenant=t, start=today, end=today)["total"]

    mine = Conversation.objects.filter(tenant=t)
    assert total["conversations"] == mine.count() == 6
    # AI-resolved, counted directly: answered last, no hand-over, no 👎.
    direct_ai = [c for c in mine if not c.handoff_reason and not Feedback.objects.filter(conversation=c, rating="down")
                 and c.messages.order_by("seq").last().role == "assistant"]
    assert total["outcomes"]["ai_resolved"] == len(direct_ai) == 3
    assert total["ai_resolved_rate"] == pytest.approx(3 / 6)
    assert total["handover_by_reason"]["agent"] == mine.exclude(handoff_reason="").count() == 1
    assert (total["thumbs_up"], total["thumbs_down"]) == (1, 1)
    assert total["csat_ai"] == pytest.approx(3.5) and total["csat_human"] == 4
    # Cost: the usage records of the AI-resolved conversations' replies, summed directly.
    replies = Message.objects.filter(conversation__in=direct_ai, role="assistant").values_list("pk", flat=True)
    usage = UsageRecord.objects.filter(message_id__in=replies)
    tokens = sum(u.prompt_tokens + u.completion_tokens for u in usage)
    assert total["cost_per_ai_resolved"]["tokens"] == pytest.approx(tokens / 3)
    assert total["cost_per_ai_resolved"]["prefill_s"] == pytest.approx(sum(u.ttft_ms - u.queue_ms for u in usage) / 1000 / 3)
    assert total["cost_per_ai_resolved"]["decode_s"] == pytest.approx(sum(u.duration_ms - u.ttft_ms for u in usage) / 1000 / 3)
    # Unanswered: the replies retrieval found nothing for (all but the cited one; the 👎
    # one is among them, and counts once).
    finished = Message.objects.filter(conversation__tenant=t, role="assistant", status="done").count()
    assert total["unanswered"] == finished - 1
    assert total["median_first_response_human_ms"] == pytest.approx(30_000)


def test_the_outcomes_page_and_csv_are_the_tenants_alone(client):
    mine, theirs = make_tenant(), make_tenant()
    viewer = user()
    Membership.objects.create(user=viewer, tenant=mine.tenant, role=Membership.Role.VIEWER)
    c = build(mine.tenant, "user", "reply")
    build(theirs.tenant, "user", "reply")
    outcomes_rollup(now=timezone.now() + LATER)
    client.force_login(viewer)
    page = client.get(f"/console/t/{mine.tenant.slug}/outcomes/?days=7&period=week")
    assert page.status_code == 200
    assert "AI-resolved rate" in page.content.decode()
    csv = b"".join(client.get(f"/console/t/{mine.tenant.slug}/outcomes/export.csv").streaming_content).decode()
    lines = csv.strip().splitlines()
    assert lines[0].startswith("conversation_id,day,outcome") and len(lines) == 2 and str(c.pk) in lines[1]
    assert client.get(f"/console/t/{theirs.tenant.slug}/outcomes/").status_code == 404
    assert client.get(f"/console/t/{theirs.tenant.slug}/outcomes/export.csv").status_code == 404
    # Bad choices fall back to the defaults rather than failing.
    assert client.get(f"/console/t/{mine.tenant.slug}/outcomes/?days=abc&period=year").status_code == 200
