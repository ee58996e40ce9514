"""Knowledge gaps (tandem.feedback.gaps): unanswered questions (no source found, 👎,
handed over as ungrounded) grouped by retrieval's own terms and ranked, the tenant's
alone, each with a "Write an article" link that opens the article form pre-filled."""

from __future__ import annotations

import datetime as dt
import html

import pytest
from django.utils import timezone

from knowledge.models import Citation, KnowledgeSettings
from tandem.chat.models import Conversation, Message
from tandem.feedback.gaps import knowledge_gaps
from tandem.feedback.models import Feedback
from tenants.models import Membership
from tests.console.conftest import user
from tests.factories import make_tenant

pytestmark = pytest.mark.django_db


def asked(tenant, question: str, *, cited=False, down=False, **conv) -> Conversation:
    c = Conversation.objects.create(tenant=tenant, channel="widget", visitor_id="v", **conv)
    Message.objects.create(conversation=c, role="user", content=question)
    if conv.get("handoff_reason"):
        return c
    reply = Message.objects.create(conversation=c, role="assistant", content="Hmm.", status="done")
    if cited:
        Citation.objects.create(tenant=tenant, message_id=reply.pk, rank=0, title="Refunds", score=0.8)
    if down:
        Feedback.objects.create(tenant=tenant, conversation=c, message=reply, rater="v", rating="down")
    return c


def test_unanswered_questions_are_grouped_by_their_terms_and_ranked():
    t, other = make_tenant().tenant, make_tenant().tenant
    KnowledgeSettings.objects.create(tenant=t, enabled=True)
    asked(t, "How do I return boots?")
    asked(t, "how do I RETURN my boots")
    asked(t, "Return boots, how?")
    asked(t, "Do you ship to Iceland?", cited=True, down=True)
    asked(t, "Where is my refund?", cited=True)  # answered from a source, no 👎: not a gap
    asked(t, "Can I pay with crypto?", handoff="pending_human", handoff_reason="ungrounded",
          handoff_at=timezone.now() + dt.timedelta(seconds=1))
    asked(other, "How do I return boots?")
    today = timezone.now().astimezone(dt.UTC).date()
    gaps = knowledge_gaps(tenant=t, start=today, end=today)
    assert [(g["count"], g["reasons"]) for g in gaps] == [
        (3, {"no_source": 3}), (1, {"thumbs_down": 1}), (1, {"ungrounded": 1})]
    assert set(gaps[0]["examples"]) == {"How do I return boots?", "how do I RETURN my boots", "Return boots, how?"}
    assert [g["question"] for g in gaps[1:]] == ["Do you ship to Iceland?", "Can I pay with crypto?"]


def test_with_knowledge_off_a_reply_without_sources_is_no_gap():
    t = make_tenant().tenant
    KnowledgeSettings.objects.create(tenant=t, enabled=False)
    asked(t, "How do I return boots?")
    today = timezone.now().astimezone(dt.UTC).date()
    assert knowledge_gaps(tenant=t, start=today, end=today) == []


def test_the_outcomes_page_links_each_gap_to_a_prefilled_article_form(client):
    created = make_tenant()
    owner = user()
    Membership.objects.create(user=owner, tenant=created.tenant, role=Membership.Role.OWNER)
    asked(created.tenant, "Can I repair a zip?")
    client.force_login(owner)
    page = client.get(f"/console/t/{created.tenant.slug}/outcomes/").content.decode()
    link = f"/console/t/{created.tenant.slug}/knowledge/new/?title=Can%20I%20repair%20a%20zip%3F"
    assert html.escape(link) in page and "Write an article" in page
    form = client.get(link).content.decode()
    assert 'value="Can I repair a zip?"' in form
