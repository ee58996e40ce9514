"""Search over conversations with PostgreSQL's full-text search (tandem.chat.search), in
the inbox (with its filters and a date range) and on the Conversations page: a word of
any message (as a prefix), the visitor's name or e-mail; only the tenant's own; the GIN
index serves it; bad dates are a 400 that says so. Visitors are named on the
Conversations page too, never by their hex id."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from tandem.chat import search
from tandem.chat.models import Conversation, Message
from tandem.handoff import inbox
from tenants.access import access_list
from tests.world import conversation, waiting

pytestmark = pytest.mark.django_db


def test_a_search_finds_a_word_of_any_message_by_its_start_within_the_tenant(world):
    t = world.a.tenant
    parcel = waiting(t, "My parcel never arrived in Lyon")
    Message.objects.create(conversation=parcel, role=Message.Role.NOTE, content="Carrier confirmed the refund")
    waiting(t, "How do I reset my password?")
    waiting(world.b.tenant, "My parcel is late too")

    def found(q):
        return {c.pk for c in search.conversations_matching(access_list(Conversation, tenant=t), q)}

    assert found("parcel") == {parcel.pk}  # not the other tenant's parcel
    assert found("PARC arriv") == {parcel.pk}  # every word, each as a prefix, any case
    assert found("refund") == {parcel.pk}  # an internal note is searched for agents
    assert found("parcel password") == set()
    assert found("(lyon)!") == {parcel.pk}  # punctuation is no operator
    assert found("!!! & | :*") == set()
    assert len(found("")) == 3  # no search: nothing narrowed


def test_the_message_search_uses_the_gin_index():
    words = search.matching_messages("parcel")
    with connection.cursor() as cur:
        cur.execute("SET enable_seqscan = off")
        sql, params = words.query.sql_with_params()
        cur.execute("EXPLAIN " + sql, params)
        plan = "\n".join(row[0] for row in cur.fetchall())
        cur.execute("SET enable_seqscan = on")
    assert "chat_message_content_fts" in plan, plan


def test_the_inbox_searches_within_its_filter_and_dates_and_shows_the_matching_words(client, world, agent_a):
    t = world.a.tenant
    waiting(t, "The zipper on my backpack broke", user_name="Ann Lee")
    waiting(t, "Backpack straps are too short", days=5)
    waiting(t, "Where is my invoice?", user_email="bob@example.test")
    client.force_login(agent_a)
    rows = client.get(f"/console/t/{t.slug}/inbox/rows/", {"q": "backpack"}).content.decode()
    assert "<mark>backpack</mark>" in rows and "<mark>Backpack</mark>" in rows and "invoice" not in rows
    today = timezone.localdate().isoformat()
    rows = client.get(f"/console/t/{t.slug}/inbox/rows/", {"q": "backpack", "since": today}).content.decode()
    assert "zipper" in rows and "straps" not in rows
    week_ago = (timezone.localdate() - timedelta(days=7)).isoformat()
    two_days_ago = (timezone.localdate() - timedelta(days=2)).isoformat()
    rows = client.get(f"/console/t/{t.slug}/inbox/rows/", {"since": week_ago, "until": two_days_ago}).content.decode()
    assert "straps" in rows and "zipper" not in rows and "invoice" not in rows
    assert "invoice" in client.get(f"/console/t/{t.slug}/inbox/rows/", {"q": "bob@example"}).content.decode()
    assert "zipper" in client.get(f"/console/t/{t.slug}/inbox/rows/", {"q": "Ann"}).content.decode()
    nothing = client.get(f"/console/t/{t.slug}/inbox/rows/", {"q": "backpack", "view": "resolved"}).content.decode()
    assert "No conversations in this list match the search." in nothing
    page = client.get(f"/console/t/{t.slug}/inbox/", {"q": "back<script>", "view": "waiting"}).content.decode()
    assert 'value="back&lt;script&gt;"' in page and "back<script>" not in page
    assert 'href="?view=mine&amp;q=back%3Cscript%3E"' in page  # the filters keep the search
    bad = client.get(f"/console/t/{t.slug}/inbox/", {"since": "yesterday"})
    assert bad.status_code == 400 and "is not a date" in bad.content.decode() and "zipper" in bad.content.decode()


def test_the_conversations_page_searches_messages_and_names_visitors(client, world):
    t = world.a.tenant
    conv = conversation(t, "Do you deliver to Reykjavik?")
    Conversation.objects.filter(pk=conv.pk).update(visitor_id="0f3a9c1e77b2deadbeef")
    conv.refresh_from_db()
    client.force_login(world.owner_a)
    page = client.get(f"/console/t/{t.slug}/conversations/", {"q": "reykjav"}).content.decode()
    assert "<mark>Reykjavik</mark>" in page and "Where is my alpha order?" not in page
    assert inbox.visitor_name(conv) in page and ">0f3a9c1e77b2deadbeef<" not in page
    assert "Do you deliver" in client.get(f"/console/t/{t.slug}/conversations/",
                                          {"q": "0f3a9c1e77b2deadbeef"}).content.decode()  # the id, pasted whole
    detail = client.get(f"/console/t/{t.slug}/conversations/{conv.pk}/").content.decode()
    assert f"<title>{inbox.visitor_name(conv)} · Conversation" in detail
    assert f"Conversation with {inbox.visitor_name(conv)}" in detail
