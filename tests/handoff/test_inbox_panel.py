"""The side panel beside a conversation (the page the visitor came from, their browser,
their other conversations) and what feeds it (the widget socket's page and User-Agent,
kept on a new conversation); and the tenant's inbox feed, which the agents'
notifications follow: what tandem.handoff.states writes to it (real Redis) and which of it each
agent is told."""

from __future__ import annotations

import json

import pytest

from tandem.chat.browsers import browser_in_words
from tandem.chat.models import Conversation, Message
from tandem.chat.visitors import visitor_establish
from tandem.handoff import events, states
from tandem.handoff.inbox_feed import frame_for
from tenants.models import Membership
from tests.world import user

pytestmark = pytest.mark.django_db
CHROME_MAC = ("Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) "
              "Chrome/131.0.0.0 Safari/537.36")


@pytest.mark.parametrize("ua, words", [
    (CHROME_MAC, "Chrome 131 on macOS"),
    ("Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0", "Firefox 133 on Linux"),
    ("Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) "
     "Version/17.5 Mobile/15E148 Safari/604.1", "Safari 17 on iOS"),
    ("Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 "
     "Safari/537.36 Edg/131.0.2903.70", "Edge 131 on Windows"),
    ("", ""),
])
def test_a_user_agent_reads_as_a_browser_and_a_system(ua, words):
    assert browser_in_words(ua) == words


def test_the_socket_keeps_an_http_page_and_the_user_agent_on_the_visitors_new_conversation(world):
    v = visitor_establish(tenant=world.a.tenant, visitor_id="v-7", page_url="https://shop.example/cart?token=s3cr3t#x",
                          user_agent=CHROME_MAC)
    fields = v.conversation_fields()
    assert fields["page_url"] == "https://shop.example/cart" and fields["user_agent"] == CHROME_MAC  # no query
    for bad in ("javascript:alert(1)", "data:text/html,hi", "https:///nohost", "https://x.example/" + "a" * 2000):
        assert visitor_establish(tenant=world.a.tenant, visitor_id="v-7", page_url=bad).page_url == ""
    assert v == visitor_establish(tenant=world.a.tenant, visitor_id="v-7")  # not part of who they are


def test_the_side_panel_shows_the_page_the_browser_and_past_conversations_of_this_visitor(client, world):
    t = world.a.tenant
    agent = user(first_name="Sam")
    Membership.objects.create(user=agent, tenant=t, role=Membership.Role.AGENT)
    old = Conversation.objects.create(tenant=t, channel="widget", visitor_id="v-42")
    Message.objects.create(conversation=old, role=Message.Role.USER, content="Do you sell gift cards?")
    Conversation.objects.create(tenant=t, channel="widget", visitor_id="v-other")  # someone else's
    Conversation.objects.create(tenant=world.b.tenant, channel="widget", visitor_id="v-42")  # another tenant's
    now = Conversation.objects.create(tenant=t, channel="widget", visitor_id="v-42",
                                      page_url="https://shop.example/returns", user_agent=CHROME_MAC)
    Message.objects.create(conversation=now, role=Message.Role.USER, content="A person please")
    states.handoff_request(conversation=now, reason="button")
    client.force_login(agent)
    page = client.get(f"/console/t/{t.slug}/inbox/{now.pk}/").content.decode()
    panel = page.split('aria-label="About the visitor"')[1].split("</aside>")[0]
    assert 'href="https://shop.example/returns" rel="noopener noreferrer nofollow"' in panel
    assert "Chrome 131 on macOS" in panel
    assert "Do you sell gift cards?" in panel and f"/inbox/{old.pk}/" in panel
    assert panel.count("<li>") == 1  # neither the other visitor's nor the other tenant's
    bare = Conversation.objects.create(tenant=t, channel="widget", visitor_id="v-9")
    page = client.get(f"/console/t/{t.slug}/inbox/{bare.pk}/").content.decode()
    assert "None: this is their first." in page and "not known" in page


def test_hand_overs_and_visitor_messages_reach_the_tenants_inbox_feed(world, redis_client,
                                                                     django_capture_on_commit_callbacks):
    t = world.a.tenant
    agent = user(first_name="Sam")
    Membership.objects.create(user=agent, tenant=t, role=Membership.Role.AGENT)
    key = events.inbox_feed_key(t.pk)
    redis_client.delete(key)
    conv = world.conv_a
    Conversation.objects.filter(pk=conv.pk).update(user_name="Ann Lee")
    conv.refresh_from_db()
    with django_capture_on_commit_callbacks(execute=True):  # published on commit, as in a request
        states.handoff_request(conversation=conv, reason="button")
        conv.refresh_from_db()
        states.conversation_claim(conversation=conv, agent=agent)
        with pytest.raises(states.HeldForPerson):
            states.hold_if_with_person(conversation=conv, text="Are you there?")
        states.agent_message(conversation=conv, agent=agent, text="Yes!")  # an agent's words: not in the feed
    feed = [(i.decode(), json.loads(f[b"e"])) for i, f in redis_client.xrange(key)]
    assert [(e["type"], e.get("state")) for _, e in feed] == [("handoff", "pending_human"), ("handoff", "human"),
                                                            ("message", None)]
    assert {e["visitor"] for _, e in feed} == {"Ann Lee"} and feed[2][1]["text"] == "Are you there?"
    assert feed[1][1]["by"] == agent.pk and feed[2][1]["assignee"] == agent.pk
    assert not redis_client.xrange(events.inbox_feed_key(world.b.tenant.pk))

    # Who is told what: everyone of a hand-over; the owner of their visitor's messages;
    # nobody of their own claim.
    told = {who: [frame_for(i, e, user_id=who, slug=t.slug) for i, e in feed] for who in (agent.pk, agent.pk + 1000)}
    mine = [f["type"] if f else None for f in told[agent.pk]]
    others = [f["type"] if f else None for f in told[agent.pk + 1000]]
    assert mine == ["handover", None, "message"] and others == ["handover", None, None]
    assert told[agent.pk][2]["url"] == f"/console/t/{t.slug}/inbox/{conv.pk}/"
    assert told[agent.pk][0]["id"] == feed[0][0]


def test_a_hand_over_in_words_reaches_the_feed_from_the_reply_sink(world, redis_client):
    """The CPU tier's hand-over (asked in words) is told by the reply sink, not the states."""
    from tandem.chat.reply_sink import ReplyRows

    key = events.inbox_feed_key(world.a.tenant.pk)
    redis_client.delete(key)
    conv = world.conv_a
    Conversation.objects.filter(pk=conv.pk).update(handoff="pending_human")
    ReplyRows().conversation_handed_over(conversation_id=str(conv.pk))
    [(_, fields)] = redis_client.xrange(key)
    entry = json.loads(fields[b"e"])
    assert (entry["type"], entry["state"], entry["conversation"]) == ("handoff", "pending_human", str(conv.pk))
