"""The agent's workspace over HTTP: landing in the inbox after sign-in, the waiting count,
the filters, visitors' names and human waiting times, the reply box's note switch, and
claim / resolve as htmx posts (resolve goes on to the next waiting conversation)."""

from __future__ import annotations

import pytest

from tandem.chat.models import Conversation, Message
from tandem.console.templatetags.inbox import human_duration
from tandem.handoff import inbox, states
from tenants.models import Membership
from tests.world import PASSWORD, user, waiting

pytestmark = pytest.mark.django_db
HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def agent_b(world):
    u = user(first_name="Noor")
    Membership.objects.create(user=u, tenant=world.a.tenant, role=Membership.Role.AGENT)
    return u


def test_an_agent_signing_in_lands_in_the_inbox_and_a_viewer_on_the_overview(client, world, agent_a):
    r = client.post("/console/login/", {"username": agent_a.username, "password": PASSWORD})
    assert r.status_code == 302 and r.url == f"/console/t/{world.a.tenant.slug}/inbox/"
    client.logout()
    r = client.post("/console/login/", {"username": world.viewer_a.username, "password": PASSWORD})
    assert r.status_code == 302 and r.url == "/console/"
    client.logout()
    r = client.post("/console/login/?next=/console/invitations/", {"username": agent_a.username, "password": PASSWORD})
    assert r.url == "/console/invitations/"  # an explicit destination still wins


def test_the_waiting_count_is_in_every_tenant_page_nav_and_counts_only_this_tenant(client, world, agent_a):
    waiting(world.a.tenant, "one")
    waiting(world.a.tenant, "two")
    waiting(world.b.tenant, "theirs")
    client.force_login(agent_a)
    page = client.get(f"/console/t/{world.a.tenant.slug}/conversations/").content.decode()
    assert 'id="inbox-count"' in page and f"/console/t/{world.a.tenant.slug}/inbox/count/" in page
    count = client.get(f"/console/t/{world.a.tenant.slug}/inbox/count/").content.decode()
    assert 'data-waiting="2"' in count and ">2</span>" in count
    assert client.get(f"/console/t/{world.b.tenant.slug}/inbox/count/").status_code == 404
    client.force_login(world.viewer_a)  # no inbox: no count, and its URL is refused
    assert 'id="inbox-count"' not in client.get(f"/console/t/{world.a.tenant.slug}/conversations/").content.decode()
    assert client.get(f"/console/t/{world.a.tenant.slug}/inbox/count/").status_code == 403


def test_the_filters_show_mine_unassigned_waiting_and_resolved(client, world, agent_a, agent_b):
    t = world.a.tenant
    mine, theirs, pending, done = (waiting(t, text) for text in ("mine q", "theirs q", "pending q", "done q"))
    states.conversation_claim(conversation=mine, agent=agent_a)
    states.conversation_claim(conversation=theirs, agent=agent_b)
    states.conversation_claim(conversation=done, agent=agent_a)
    done.refresh_from_db()
    states.conversation_resolve(conversation=done)
    client.force_login(agent_a)

    def listed(view):
        body = client.get(f"/console/t/{t.slug}/inbox/rows/?view={view}").content.decode()
        return {text for text in ("mine q", "theirs q", "pending q", "done q") if text in body}

    assert listed("open") == {"mine q", "theirs q", "pending q"}
    assert listed("mine") == {"mine q"}
    assert listed("unassigned") == {"pending q"}
    assert listed("waiting") == {"pending q"}
    assert listed("resolved") == {"done q"}
    page = client.get(f"/console/t/{t.slug}/inbox/?view=mine").content.decode()
    assert 'href="?view=mine" aria-current="page"' in page
    bad = client.get(f"/console/t/{t.slug}/inbox/?view=everything")
    assert bad.status_code == 400 and "Unknown filter" in bad.content.decode() and "pending q" in bad.content.decode()


def test_visitors_are_named_by_what_they_told_us_and_waits_read_in_minutes(client, world, agent_a):
    t = world.a.tenant
    waiting(t, "named", minutes=11, user_name="Ann Lee")
    waiting(t, "mailed", minutes=90, user_email="bob@example.test")
    anon = waiting(t, "anonymous", minutes=0, visitor_id="0f3a9c1e77b2")
    client.force_login(agent_a)
    rows = client.get(f"/console/t/{t.slug}/inbox/rows/").content.decode()
    assert "Ann Lee" in rows and "bob@example.test" in rows and "11 min" in rows and "1 h 30 min" in rows
    friendly = inbox.visitor_name(anon)
    assert friendly in rows and "0f3a9c1e77b2" not in rows and len(friendly.split()) == 2
    assert inbox.visitor_name(Conversation.objects.get(pk=anon.pk)) == friendly  # the same visitor, the same name
    page = client.get(f"/console/t/{t.slug}/inbox/{anon.pk}/").content.decode()
    assert f"<title>{friendly} · Inbox" in page


def test_a_hand_over_from_the_menu_shows_the_last_thing_said(client, world, agent_a):
    conv = Conversation.objects.create(tenant=world.a.tenant, channel=Conversation.Channel.WIDGET, visitor_id="v-9")
    Message.objects.create(conversation=conv, role=Message.Role.ASSISTANT, content="Hi! How can I help?")
    Message.objects.create(conversation=conv, role=Message.Role.USER, content="")  # the menu's "Talk to a person"
    states.handoff_request(conversation=conv, reason="button")
    client.force_login(agent_a)
    assert "Hi! How can I help?" in client.get(f"/console/t/{world.a.tenant.slug}/inbox/rows/").content.decode()


def test_the_reply_box_switch_keeps_a_note_a_note_even_posted_to_the_reply_url(client, world, agent_a):
    conv = waiting(world.a.tenant, "help")
    states.conversation_claim(conversation=conv, agent=agent_a)
    client.force_login(agent_a)
    page = client.get(f"/console/t/{world.a.tenant.slug}/inbox/{conv.pk}/").content.decode()
    assert 'name="mode" value="note"' in page and "only your team sees this" in page
    r = client.post(f"/console/t/{world.a.tenant.slug}/inbox/{conv.pk}/reply/",
                    {"text": "refund likely", "mode": "note"}, HTTP_ACCEPT="application/json")
    assert r.status_code == 200 and r.json()["message"]["role"] == "note"
    assert conv.messages.get(content="refund likely").role == Message.Role.NOTE


def test_claim_over_htmx_swaps_the_actions_panel_and_a_taken_one_says_who_has_it(client, world, agent_a, agent_b):
    conv = waiting(world.a.tenant, "help")
    base = f"/console/t/{world.a.tenant.slug}/inbox/{conv.pk}/"
    client.force_login(agent_a)
    r = client.post(base + "claim/", **HTMX)
    body = r.content.decode()
    assert r.status_code == 200 and 'id="inbox-actions"' in body and 'id="assignee">you' in body
    assert "You are answering this conversation." in body and 'data-mine="1"' in body and 'hx-swap-oob' in body
    client.force_login(agent_b)
    r = client.post(base + "claim/", **HTMX)
    assert r.status_code == 409 and agent_a.username in r.content.decode() and 'role="alert"' in r.content.decode()


def test_resolve_over_htmx_goes_to_the_conversation_that_waited_longest(client, world, agent_a):
    t = world.a.tenant
    current = waiting(t, "current", minutes=30)
    waiting(t, "newer", minutes=1)
    oldest = waiting(t, "older", minutes=20)
    states.conversation_claim(conversation=current, agent=agent_a)
    client.force_login(agent_a)
    r = client.post(f"/console/t/{t.slug}/inbox/{current.pk}/resolve/", **HTMX)
    assert r.status_code == 200 and r["HX-Redirect"] == f"/console/t/{t.slug}/inbox/{oldest.pk}/"
    Conversation.objects.filter(tenant=t).update(handoff=Conversation.Handoff.RESOLVED)
    last = waiting(t, "last")
    states.conversation_claim(conversation=last, agent=agent_a)
    r = client.post(f"/console/t/{t.slug}/inbox/{last.pk}/resolve/", **HTMX)
    assert r["HX-Redirect"] == f"/console/t/{t.slug}/inbox/"  # nobody else waits: back to the inbox
    assert "Resolved" in client.get(r["HX-Redirect"]).content.decode()


@pytest.mark.parametrize(("seconds", "shown"), [(0, "0 s"), (59.9, "59 s"), (680, "11 min"), (3600, "1 h"),
                                                 (5400, "1 h 30 min"), (86400 * 2 + 3600, "2 d 1 h"),
                                                 (None, "–"), ("junk", "–")])
def test_a_wait_reads_in_human_units(seconds, shown):
    assert human_duration(seconds) == shown
