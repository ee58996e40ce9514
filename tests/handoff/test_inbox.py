"""The agent inbox over HTTP: who may use it, claim → reply → resolve, and another
tenant's conversations answered as missing ones (the IDOR sweep in tests/console/test_idor.py covers
every inbox URL too, for an owner and for an agent)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from tandem.chat.models import AgentPresence, Conversation, Message
from tandem.handoff import assignment, offline, states
from tenants.models import AuditLog, Membership
from tests.world import conversation, user

pytestmark = pytest.mark.django_db


def test_an_agent_claims_replies_and_resolves_from_the_inbox(client, world, agent_a):
    a, conv = world.a.tenant.slug, world.conv_a
    states.handoff_request(conversation=conv, reason="button")
    client.force_login(agent_a)
    page = client.get(f"/console/t/{a}/inbox/")
    assert page.status_code == 200 and b"Where is my alpha order?" in page.content
    assert b"waiting" in client.get(f"/console/t/{a}/inbox/rows/").content
    base = f"/console/t/{a}/inbox/{conv.pk}/"
    json = {"HTTP_ACCEPT": "application/json"}
    assert client.post(base + "reply/", {"text": "too early"}, **json).status_code == 409
    assert client.post(base + "claim/").status_code == 302
    answer = client.post(base + "reply/", {"text": "Hi, Sam here."}, **json)
    assert answer.status_code == 200 and answer.json()["message"]["author"] == "Sam"
    assert client.post(base + "note/", {"text": "refund likely"}, **json).status_code == 200
    assert client.get(base).status_code == 200
    assert client.post(base + "resolve/").status_code == 302
    conv.refresh_from_db()
    assert conv.handoff == Conversation.Handoff.RESOLVED and conv.assignee == agent_a
    roles = list(conv.messages.values_list("role", flat=True))
    assert Message.Role.AGENT in roles and Message.Role.NOTE in roles


def test_a_second_agent_cannot_claim_what_another_owns(client, world, agent_a):
    states.conversation_claim(conversation=world.conv_a, agent=world.owner_a)
    client.force_login(agent_a)
    r = client.post(f"/console/t/{world.a.tenant.slug}/inbox/{world.conv_a.pk}/claim/",
                    HTTP_ACCEPT="application/json")
    assert r.status_code == 409 and world.owner_a.username in r.json()["detail"]


def test_a_viewer_may_not_use_the_inbox(client, world):
    client.force_login(world.viewer_a)
    assert client.get(f"/console/t/{world.a.tenant.slug}/inbox/").status_code == 403


@pytest.fixture
def agent_b(world):
    u = user(first_name="Noor")
    Membership.objects.create(user=u, tenant=world.a.tenant, role=Membership.Role.AGENT)
    return u


def test_an_agent_assigns_a_conversation_to_another_agent_and_it_is_audited(client, world, agent_a, agent_b):
    a, conv = world.a.tenant.slug, world.conv_a
    states.handoff_request(conversation=conv, reason="button")
    client.force_login(agent_a)
    base = f"/console/t/{a}/inbox/{conv.pk}/"
    page = client.get(base)
    assert b"Noor" in page.content and b"Assign" in page.content
    r = client.post(base + "assign/", {"agent": agent_b.pk}, HTTP_ACCEPT="application/json")
    assert r.status_code == 200 and r.json()["state"] == "human"
    conv.refresh_from_db()
    assert conv.handoff == Conversation.Handoff.HUMAN and conv.assignee == agent_b
    log = AuditLog.objects.get(tenant=world.a.tenant, entity="conversation", action="assign")
    assert log.actor == agent_a and log.changes == {"assignee": [None, agent_b.username]}
    # Now Noor's: Sam may not reply, Noor may.
    assert client.post(base + "reply/", {"text": "me?"}, HTTP_ACCEPT="application/json").status_code == 409
    states.agent_message(conversation=conv, agent=agent_b, text="Noor here.")


def test_only_an_agent_of_the_tenant_may_be_assigned(client, world, agent_a):
    a, conv = world.a.tenant.slug, world.conv_a
    states.conversation_claim(conversation=conv, agent=agent_a)
    client.force_login(agent_a)
    for who in (world.owner_b.pk, world.viewer_a.pk, "x", ""):  # another tenant's owner, a viewer, junk
        r = client.post(f"/console/t/{a}/inbox/{conv.pk}/assign/", {"agent": who}, HTTP_ACCEPT="application/json")
        assert r.status_code == 400 and "agent of this tenant" in r.json()["detail"], who
    conv.refresh_from_db()
    assert conv.assignee == agent_a
    assert not AuditLog.objects.filter(entity="conversation").exists()


def test_an_assignment_from_a_stale_view_is_refused(world, agent_a, agent_b):
    conv = world.conv_a
    states.conversation_claim(conversation=conv, agent=agent_a)
    seen = Conversation.objects.get(pk=conv.pk)  # what a second agent's page showed
    states.conversation_assign(conversation=Conversation.objects.get(pk=conv.pk), to=agent_b, by=agent_a)
    with pytest.raises(states.Stale, match="Noor"):
        states.conversation_assign(conversation=seen, to=world.admin_a, by=world.admin_a)
    conv.refresh_from_db()
    assert conv.assignee == agent_b


def test_an_agent_is_online_only_while_they_say_so_and_their_console_is_heard_from(client, world, agent_a):
    tenant = world.a.tenant
    client.force_login(agent_a)
    assert assignment.presence_of(tenant=tenant, agent=agent_a) == "away"  # until they say otherwise
    assert client.post(f"/console/t/{tenant.slug}/inbox/presence/", {"status": "online"}).status_code == 302
    assert b'id="presence">online' in client.get(f"/console/t/{tenant.slug}/inbox/").content
    assert list(assignment.online_agents(tenant=tenant).values_list("user", flat=True)) == [agent_a.pk]
    assert not assignment.online_agents(tenant=world.b.tenant).exists()  # per tenant
    # The laptop closed: no page and no socket heard from for longer than the TTL.
    AgentPresence.objects.filter(user=agent_a).update(
        seen_at=timezone.now() - timedelta(seconds=assignment.ONLINE_TTL_S + 1))
    assert assignment.presence_of(tenant=tenant, agent=agent_a) == "away"
    client.get(f"/console/t/{tenant.slug}/inbox/rows/")  # the inbox's poll is a heartbeat
    assert assignment.presence_of(tenant=tenant, agent=agent_a) == "online"
    Membership.objects.filter(user=agent_a).update(role=Membership.Role.VIEWER)  # no inbox any more
    assert assignment.presence_of(tenant=tenant, agent=agent_a) == "away"
    Membership.objects.filter(user=agent_a).update(role=Membership.Role.AGENT)
    r = client.post(f"/console/t/{tenant.slug}/inbox/presence/", {"status": "busy"}, HTTP_ACCEPT="application/json")
    assert r.status_code == 400
    client.post(f"/console/t/{tenant.slug}/inbox/presence/", {"status": "away"})
    assert assignment.presence_of(tenant=tenant, agent=agent_a) == "away"


def test_with_round_robin_on_new_hand_overs_go_in_turn_to_the_online_agents(world, agent_a, agent_b):
    tenant = world.a.tenant
    convs = [conversation(tenant, f"question {i}") for i in range(4)]
    for agent in (agent_a, agent_b):
        assignment.presence_set(tenant=tenant, agent=agent, status="online")
    assignment.presence_set(tenant=tenant, agent=world.admin_a, status="away")
    states.handoff_request(conversation=convs[0], reason="button")
    convs[0].refresh_from_db()
    assert convs[0].handoff == "pending_human" and convs[0].assignee is None  # off by default
    tenant.handover_round_robin = True
    tenant.save()
    for c in convs[1:]:
        c.refresh_from_db()
        states.handoff_request(conversation=c, reason="button")
    owners = [Conversation.objects.get(pk=c.pk).assignee for c in convs[1:]]
    assert all(Conversation.objects.get(pk=c.pk).handoff == "human" for c in convs[1:])
    assert owners[0] != owners[1] and owners[2] == owners[0] and set(owners) == {agent_a, agent_b}


def test_with_nobody_online_a_hand_over_waits_and_says_it_is_offline(world, agent_a, redis_client):
    tenant = world.a.tenant
    tenant.handover_round_robin = True
    tenant.save()
    conv = world.conv_a
    states.handoff_request(conversation=conv, reason="button")
    conv.refresh_from_db()
    assert conv.handoff == "pending_human" and conv.assignee is None
    assert assignment.state_event(state="pending_human", agent=None, tenant_id=tenant.pk)["offline"] is True
    assignment.presence_set(tenant=tenant, agent=agent_a, status="online")
    assert "offline" not in assignment.state_event(state="pending_human", agent=None, tenant_id=tenant.pk)


def test_an_offline_message_is_answered_by_e_mail_once_and_only_in_its_tenant(client, world, agent_a, mailoutbox):
    a, conv = world.a.tenant.slug, world.conv_a
    states.handoff_request(conversation=conv, reason="button")
    conv.refresh_from_db()
    left = offline.offline_message_leave(conversation=conv, email="ann@example.test", text="Parcel 42 never came")
    client.force_login(agent_a)
    url = f"/console/t/{a}/inbox/offline/{left.pk}/answer/"
    page = client.post(url, {"text": "   "}, follow=True).content.decode()
    assert "The message is empty." in page and not mailoutbox  # a form error, nothing sent
    page = client.post(url, {"text": "It left our depot today: tracking 42."}, follow=True).content.decode()
    assert "Sent to ann@example.test." in page and "Answered by Sam" in page
    [mail] = mailoutbox
    assert mail.to == ["ann@example.test"] and mail.subject == f"Re: your message to {world.a.tenant.name}"
    assert mail.body.startswith("It left our depot today: tracking 42.") and "> Parcel 42 never came" in mail.body
    again = client.post(url, {"text": "Twice?"}, follow=True).content.decode()
    assert "Sam already answered this message." in again and len(mailoutbox) == 1
    left.refresh_from_db()
    assert (left.answered_by, left.answer) == (agent_a, "It left our depot today: tracking 42.")
    # Another tenant's offline message is not found, exactly like a missing one.
    states.handoff_request(conversation=world.conv_b, reason="button")
    world.conv_b.refresh_from_db()
    theirs = offline.offline_message_leave(conversation=world.conv_b, email="bob@example.test", text="hello")
    assert client.post(f"/console/t/{a}/inbox/offline/{theirs.pk}/answer/", {"text": "x"}).status_code == 404
    assert client.post(f"/console/t/{a}/inbox/offline/999999/answer/", {"text": "x"}).status_code == 404
    assert len(mailoutbox) == 1
