"""The agent inbox over HTTP: who may use it, claim → reply → resolve, and another
tenant's conversations answered as missing ones (the IDOR sweep in test_idor.py covers
every inbox URL too, for an owner and for an agent)."""

from __future__ import annotations

import pytest

from tandem.chat import ownership
from tandem.chat.models import Conversation, Message
from tenants.models import Membership
from tests.console.conftest import user

pytestmark = pytest.mark.django_db


@pytest.fixture
def agent_a(world):
    u = user(first_name="Sam")
    Membership.objects.create(user=u, tenant=world.a.tenant, role=Membership.Role.AGENT)
    return u


def test_an_agent_claims_replies_and_resolves_from_the_inbox(client, world, agent_a):
    a, conv = world.a.tenant.slug, world.conv_a
    ownership.handoff_request(conversation=conv, reason="button")
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
    ownership.conversation_claim(conversation=world.conv_a, agent=world.owner_a)
    client.force_login(agent_a)
    r = client.post(f"/console/t/{world.a.tenant.slug}/inbox/{world.conv_a.pk}/claim/",
                    HTTP_ACCEPT="application/json")
    assert r.status_code == 409 and world.owner_a.username in r.json()["detail"]


def test_a_viewer_may_not_use_the_inbox(client, world):
    client.force_login(world.viewer_a)
    assert client.get(f"/console/t/{world.a.tenant.slug}/inbox/").status_code == 403
