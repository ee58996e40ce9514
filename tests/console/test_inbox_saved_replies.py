"""Saved replies: added and deleted from the inbox by anyone with it, refused with a form
error when the shortcut or a variable is wrong, and looked up by shortcut with the
variables filled in for the conversation; another tenant's are not there."""

from __future__ import annotations

import pytest

from tandem.chat.models import Conversation
from tandem.handoff import states
from tandem.saved_replies import services
from tandem.saved_replies.models import SavedReply

pytestmark = pytest.mark.django_db


def test_an_agent_adds_a_saved_reply_and_it_expands_with_the_visitors_name(client, world, agent_a):
    a = world.a.tenant
    client.force_login(agent_a)
    r = client.post(f"/console/t/{a.slug}/inbox/replies/",
                    {"shortcut": "/Refund", "text": "Hi {{visitor.name}}, {{ agent.name }} from {{tenant.name}} here."})
    assert r.status_code == 302
    assert SavedReply.objects.get(tenant=a).shortcut == "refund"
    assert "/refund" in client.get(f"/console/t/{a.slug}/inbox/replies/").content.decode()
    Conversation.objects.filter(pk=world.conv_a.pk).update(user_name="Ann Lee")
    found = client.get(f"/console/t/{a.slug}/inbox/{world.conv_a.pk}/replies/?q=ref").json()["replies"]
    assert found == [{"shortcut": "refund", "text": f"Hi Ann Lee, Sam from {a.name} here."}]
    Conversation.objects.filter(pk=world.conv_a.pk).update(user_name="")
    found = client.get(f"/console/t/{a.slug}/inbox/{world.conv_a.pk}/replies/?q=").json()["replies"]
    assert found[0]["text"].startswith("Hi there, Sam")  # a visitor who gave no name
    assert client.get(f"/console/t/{a.slug}/inbox/{world.conv_a.pk}/replies/?q=zzz").json() == {"replies": []}


@pytest.mark.parametrize(("shortcut", "text", "field", "says"), [
    ("has space", "hello", "shortcut", "lower-case letters"),
    ("", "hello", "shortcut", "lower-case letters"),
    ("ok", "   ", "text", "The reply is empty."),
    ("ok", "Hi {{visitor.phone}}", "text", "Unknown variable {{visitor.phone}}"),
    ("ok", "x" * 4001, "text", "at most 4000"),
])
def test_a_bad_saved_reply_is_a_form_error_and_nothing_is_saved(client, world, agent_a, shortcut, text, field, says):
    client.force_login(agent_a)
    r = client.post(f"/console/t/{world.a.tenant.slug}/inbox/replies/", {"shortcut": shortcut, "text": text})
    assert r.status_code == 400 and says in r.content.decode() and f'id="{field}-error"' in r.content.decode()
    assert not SavedReply.objects.exists()


def test_a_duplicate_shortcut_is_refused_but_another_tenant_may_use_it(client, world, agent_a):
    services.saved_reply_create(tenant=world.b.tenant, shortcut="hello", text="B's")
    client.force_login(agent_a)
    url = f"/console/t/{world.a.tenant.slug}/inbox/replies/"
    assert client.post(url, {"shortcut": "hello", "text": "A's"}).status_code == 302
    again = client.post(url, {"shortcut": "hello", "text": "A's again"})
    assert again.status_code == 400 and "/hello already exists." in again.content.decode()
    # A's lookup never offers B's reply.
    found = client.get(f"/console/t/{world.a.tenant.slug}/inbox/{world.conv_a.pk}/replies/?q=hel").json()["replies"]
    assert [f["text"] for f in found] == ["A's"]


def test_another_tenants_saved_reply_cannot_be_deleted_and_a_viewer_has_none(client, world, agent_a):
    theirs = services.saved_reply_create(tenant=world.b.tenant, shortcut="hello", text="B's")
    mine = services.saved_reply_create(tenant=world.a.tenant, shortcut="bye", text="Bye {{visitor.name}}")
    client.force_login(agent_a)
    a = world.a.tenant.slug
    assert client.post(f"/console/t/{a}/inbox/replies/{theirs.pk}/delete/").status_code == 404
    assert client.post(f"/console/t/{a}/inbox/replies/{mine.pk}/delete/").status_code == 302
    assert list(SavedReply.objects.values_list("shortcut", flat=True)) == ["hello"]
    client.force_login(world.viewer_a)
    assert client.get(f"/console/t/{a}/inbox/replies/").status_code == 403
    states.handoff_request(conversation=world.conv_a, reason="button")
    assert client.get(f"/console/t/{a}/inbox/{world.conv_a.pk}/replies/?q=").status_code == 403
