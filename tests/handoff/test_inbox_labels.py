"""Labels over HTTP: defined by those who manage the tenant (audited; a duplicate or a
bad colour is a form error), set on a conversation by an agent, a filter of the inbox,
and the inbox's bulk actions (add a label, resolve, assign); another tenant's labels and
conversations are not found, and a bulk action that would touch one changes nothing."""

from __future__ import annotations

import pytest

from tandem.chat.models import Conversation
from tandem.handoff import states
from tandem.labels import services
from tandem.labels.models import Label
from tenants.models import AuditLog
from tests.world import waiting

pytestmark = pytest.mark.django_db
HTMX = {"HTTP_HX_REQUEST": "true"}


def test_an_admin_defines_labels_and_an_agent_sees_them_but_may_not_change_them(client, world, agent_a):
    a = world.a.tenant
    client.force_login(world.admin_a)
    url = f"/console/t/{a.slug}/inbox/labels/"
    assert client.post(url, {"name": "  Refund   request ", "color": "amber"}).status_code == 302
    made = Label.objects.get(tenant=a)
    assert (made.name, made.color) == ("Refund request", "amber")
    assert AuditLog.objects.filter(tenant=a, entity="label", action="create", entity_id=str(made.pk)).exists()
    dup = client.post(url, {"name": "refund REQUEST", "color": "blue"})
    assert dup.status_code == 400 and "exists already" in dup.content.decode()
    bad = client.post(url, {"name": "Bug", "color": "#ff0000; background:url(x)"})
    assert bad.status_code == 400 and "Choose a colour" in bad.content.decode()
    assert client.post(url, {"name": "", "color": "red"}).status_code == 400
    assert Label.objects.filter(tenant=a).count() == 1
    edit = client.post(f"{url}{made.pk}/edit/", {"name": "Refund", "color": "red"})
    assert edit.status_code == 302 and Label.objects.get(pk=made.pk).name == "Refund"
    assert AuditLog.objects.filter(tenant=a, entity="label", action="update").exists()

    client.force_login(agent_a)
    page = client.get(url)
    assert page.status_code == 200 and "Refund" in page.content.decode() and "Add a label" not in page.content.decode()
    assert client.post(url, {"name": "Mine", "color": "red"}).status_code == 403
    assert client.post(f"{url}{made.pk}/delete/").status_code == 403
    client.force_login(world.viewer_a)
    assert client.get(url).status_code == 403


def test_another_tenants_label_is_not_found_anywhere(client, world, agent_a):
    theirs = services.label_create(tenant=world.b.tenant, name="Theirs")
    a = world.a.tenant.slug
    client.force_login(world.owner_a)
    assert client.post(f"/console/t/{a}/inbox/labels/{theirs.pk}/edit/", {"name": "x", "color": "red"}).status_code == 404
    assert client.post(f"/console/t/{a}/inbox/labels/{theirs.pk}/delete/").status_code == 404
    assert Label.objects.filter(pk=theirs.pk, name="Theirs").exists()
    conv = waiting(world.a.tenant, "help")
    client.force_login(agent_a)
    r = client.post(f"/console/t/{a}/inbox/{conv.pk}/labels/", {"label": [theirs.pk]}, **HTMX)
    assert r.status_code == 400 and "no longer exists" in r.content.decode()
    assert not conv.labels.exists()
    assert client.get(f"/console/t/{a}/inbox/?label={theirs.pk}").status_code == 400


def test_an_agent_sets_labels_on_a_conversation_and_filters_the_inbox_by_one(client, world, agent_a):
    t = world.a.tenant
    refund, bug = services.label_create(tenant=t, name="Refund", color="amber"), services.label_create(tenant=t, name="Bug")
    first, second = waiting(t, "money back please"), waiting(t, "the page is broken")
    client.force_login(agent_a)
    page = client.get(f"/console/t/{t.slug}/inbox/{first.pk}/").content.decode()
    assert 'aria-label="Labels of this conversation"' in page and "Refund" in page
    r = client.post(f"/console/t/{t.slug}/inbox/{first.pk}/labels/", {"label": [refund.pk, bug.pk]}, **HTMX)
    assert r.status_code == 200 and "Labels saved." in r.content.decode() and "checked" in r.content.decode()
    assert set(first.labels.all()) == {refund, bug}
    assert client.post(f"/console/t/{t.slug}/inbox/{first.pk}/labels/", {"label": [refund.pk]}).status_code == 302
    assert list(first.labels.all()) == [refund]  # exactly the ticked ones
    rows = client.get(f"/console/t/{t.slug}/inbox/rows/?label={refund.pk}").content.decode()
    assert "money back please" in rows and "the page is broken" not in rows and "label-amber" in rows
    everything = client.get(f"/console/t/{t.slug}/inbox/rows/").content.decode()
    assert "money back please" in everything and "the page is broken" in everything
    assert second.labels.count() == 0


def test_bulk_actions_label_resolve_and_assign_the_ticked_conversations(client, world, agent_a):
    t = world.a.tenant
    vip = services.label_create(tenant=t, name="VIP")
    one, two, three = waiting(t, "one"), waiting(t, "two"), waiting(t, "three")
    client.force_login(agent_a)
    bulk = f"/console/t/{t.slug}/inbox/bulk/"
    r = client.post(bulk, {"c": [one.pk, two.pk], "action": "label", "label": vip.pk, "back": "?view=waiting"})
    assert r.status_code == 302 and r.url == f"/console/t/{t.slug}/inbox/?view=waiting"
    assert set(vip.conversations.all()) == {one, two}
    r = client.post(bulk, {"c": [one.pk, three.pk], "action": "assign", "agent": world.admin_a.pk}, follow=True)
    assert "Assigned 2 conversations." in r.content.decode()
    assert set(Conversation.objects.filter(assignee=world.admin_a).values_list("pk", flat=True)) == {one.pk, three.pk}
    states.conversation_resolve(conversation=Conversation.objects.get(pk=three.pk))
    r = client.post(bulk, {"c": [one.pk, two.pk, three.pk], "action": "resolve"}, follow=True)
    body = r.content.decode()
    assert "Resolved 2 conversations." in body and "1 left as they were: not with a person" in body
    assert set(Conversation.objects.filter(pk__in=[one.pk, two.pk, three.pk]).values_list("handoff", flat=True)) == {
        "resolved"}


def test_a_bulk_action_that_names_anything_not_of_this_tenant_changes_nothing(client, world, agent_a):
    t = world.a.tenant
    mine = waiting(t, "mine")
    theirs = waiting(world.b.tenant, "theirs")
    their_label = services.label_create(tenant=world.b.tenant, name="Theirs")
    client.force_login(agent_a)
    bulk = f"/console/t/{t.slug}/inbox/bulk/"
    r = client.post(bulk, {"c": [mine.pk, theirs.pk], "action": "resolve"})
    assert r.status_code == 404 and "nothing was changed" in r.content.decode()
    assert Conversation.objects.get(pk=mine.pk).handoff == "pending_human"
    assert Conversation.objects.get(pk=theirs.pk).handoff == "pending_human"
    assert client.post(bulk, {"c": [mine.pk], "action": "label", "label": their_label.pk}).status_code == 404
    assert client.post(bulk, {"c": [mine.pk], "action": "assign", "agent": world.owner_b.pk}).status_code == 404
    assert client.post(bulk, {"c": ["not-an-id"], "action": "resolve"}).status_code == 404
    none = client.post(bulk, {"action": "resolve"})
    assert none.status_code == 400 and "Tick at least one conversation." in none.content.decode()
    assert client.post(bulk, {"c": [mine.pk], "action": "delete"}).status_code == 400
    assert not their_label.conversations.exists() and Conversation.objects.get(pk=mine.pk).assignee is None
    client.force_login(world.viewer_a)
    assert client.post(bulk, {"c": [mine.pk], "action": "resolve"}).status_code == 403
