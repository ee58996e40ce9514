"""Contacts' data (docs/privacy.md): one contact's export holds everything of theirs, and
their deletion (REST or console) leaves no row, file or Redis key of theirs while
others' data and the usage records stay; the retention purge deletes only what is idle
past the tenant's period; every deletion and purge is in the audit log, without the
contact's id."""

from __future__ import annotations

import base64
import json
from datetime import timedelta

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.utils import timezone

from inference.wire import keys
from knowledge.models import Citation
from tandem.attachments import services as attachments
from tandem.attachments.models import Attachment
from tandem.chat.models import Conversation, Message, OfflineMessage
from tandem.chat.visitors import Visitor
from tandem.contacts import services
from tandem.contacts.models import RetentionPolicy
from tandem.feedback.models import Csat, Feedback
from tandem.handoff import events
from tandem.webhooks import services as webhooks
from tandem.webhooks.models import Event
from tenants import audit
from tenants.models import AuditLog, Membership, UsageRecord
from tests.console.conftest import user
from tests.factories import make_tenant

from .conftest import PNG

pytestmark = pytest.mark.django_db


def a_conversation(tenant, text: str, **owner) -> Conversation:
    conv = Conversation.objects.create(tenant=tenant, channel="widget", **owner)
    Message.objects.create(conversation=conv, role="user", content=text)
    reply = Message.objects.create(conversation=conv, role="assistant", content=f"About {text}: yes.",
                                   completion_tokens=5, prompt_tokens=40)
    UsageRecord.objects.create(tenant=tenant, message_id=reply.pk, prompt_tokens=40, completion_tokens=5)
    Citation.objects.create(tenant=tenant, message_id=reply.pk, rank=1, title="Returns", score=0.5)
    return conv


@pytest.fixture
def people(attachment_dir, redis_client):
    """Ann (a verified user of Acme's site, two conversations, a rating, a CSAT, an
    offline message, a picture she sent, a webhook event quoting her words and live
    events in Redis); Bob, another visitor of Acme; and Ann's namesake at another tenant."""
    acme, other = make_tenant(slug="acme-privacy"), make_tenant(slug="other-privacy")
    ann = {"user_id": "u-42", "user_verified": True, "user_name": "Ann Lee", "user_email": "ann@example.test",
           "visitor_id": "v-ann"}
    first = a_conversation(acme.tenant, "my tent pole", **ann)
    second = a_conversation(acme.tenant, "a refund", **ann)
    bob = a_conversation(acme.tenant, "opening hours", visitor_id="v-bob")
    namesake = a_conversation(other.tenant, "elsewhere", user_id="u-42", user_verified=True)
    reply = first.messages.get(role="assistant")
    Feedback.objects.create(tenant=acme.tenant, conversation=first, message=reply, rater="user:u-42", rating="up")
    Csat.objects.create(tenant=acme.tenant, conversation=first, score=5, answered_by="ai", rater="user:u-42")
    OfflineMessage.objects.create(tenant=acme.tenant, conversation=second, email="ann@example.test", text="Call me")
    visitor = Visitor(visitor_id="v-ann", user_id="u-42", verified=True)
    upload = attachments.attachment_upload(tenant=acme.tenant, upload=SimpleUploadedFile("pole.png", PNG),
                                           sender="visitor", owner=visitor.subject)
    attachments.visitor_attachment_send(tenant=acme.tenant, visitor=visitor, attachment_id=upload.pk,
                                        conversation=first, text="the broken pole")
    webhooks.endpoint_create(tenant=acme.tenant, url="https://hooks.example.com/", events=["message.created"])
    from tandem.webhooks.chat_events import message_created
    message_created(first.messages.get(role="user", content="my tent pole"), tenant_id=acme.tenant.pk)
    events.publish(redis_client, str(first.pk), {"type": "typing", "from": "visitor"})
    return acme, other, first, second, bob, namesake


def auth(created) -> dict:
    return {"HTTP_AUTHORIZATION": f"Bearer {created.secret_key.plaintext}"}


def test_export_then_delete_over_rest_leaves_nothing_of_theirs(client, people, attachment_dir, redis_client,
                                                               django_capture_on_commit_callbacks):
    acme, other, first, second, bob, namesake = people
    ann_messages = list(Message.objects.filter(conversation__in=[first, second]).values_list("pk", flat=True))
    picture = Attachment.objects.get(conversation=first)
    assert (attachment_dir / picture.path).exists()
    assert Event.objects.filter(tenant=acme.tenant).count() == 1

    summary = client.get("/api/v1/contacts/user:u-42/", **auth(acme)).json()
    assert (summary["conversations"], summary["names"], summary["emails"]) == (2, ["Ann Lee"], ["ann@example.test"])
    exported = client.get("/api/v1/contacts/user:u-42/export/", **auth(acme))
    assert exported.status_code == 200 and exported["Content-Disposition"].startswith("attachment")
    data = exported.json()
    assert data["contact"]["id"] == "user:u-42" and data["contact"]["emails"] == ["ann@example.test"]
    assert {c["id"] for c in data["conversations"]} == {str(first.pk), str(second.pk)}
    texts = [m["text"] for c in data["conversations"] for m in c["messages"]]
    assert "my tent pole" in texts and "a refund" in texts and "the broken pole" in texts
    files = [f for c in data["conversations"] for m in c["messages"] for f in m["attachments"]]
    assert [(f["name"], base64.b64decode(f["data_base64"])) for f in files] == [("pole.png", PNG)]
    by_id = {c["id"]: c for c in data["conversations"]}
    assert by_id[str(first.pk)]["csat"]["score"] == 5 and by_id[str(first.pk)]["feedback"][0]["rating"] == "up"
    assert by_id[str(second.pk)]["offline_messages"][0]["text"] == "Call me"

    with django_capture_on_commit_callbacks(execute=True):  # the Redis keys go once the deletion commits
        deleted = client.delete("/api/v1/contacts/user:u-42/", **auth(acme))
    assert deleted.status_code == 200, deleted.content
    assert deleted.json() == {"id": "user:u-42", "object": "contact", "deleted": True, "counts": {
        "conversations": 2, "messages": 5, "attachments": 1, "webhook_events": 1}}

    # Nothing of Ann's is left at Acme: rows, the file, webhook events, Redis keys.
    assert Conversation.objects.filter(tenant=acme.tenant, user_id="u-42").count() == 0
    assert Message.objects.filter(pk__in=ann_messages).count() == 0
    assert Feedback.objects.count() == Csat.objects.count() == OfflineMessage.objects.count() == 0
    assert Attachment.objects.count() == 0 and not (attachment_dir / picture.path).exists()
    assert Citation.objects.filter(message_id__in=ann_messages).count() == 0
    assert Event.objects.filter(tenant=acme.tenant).count() == 0
    assert redis_client.exists(keys.conversation_events(str(first.pk))) == 0
    # Usage stays, with nothing of the person; Bob and Ann's namesake elsewhere stay whole.
    assert UsageRecord.objects.filter(tenant=acme.tenant).count() == 3
    assert Message.objects.filter(conversation=bob).count() == 2
    assert Conversation.objects.filter(pk=namesake.pk).exists()
    # Audited, the export too, without the contact's id.
    logged = list(AuditLog.objects.filter(tenant=acme.tenant, entity="contact").values_list("action", "entity_id",
                                                                                             "summary", "actor_name"))
    assert sorted(a for a, *_ in logged) == ["delete", "export"]
    assert all("u-42" not in entity and "u-42" not in summary for _, entity, summary, _ in logged)
    assert logged[0][1] == logged[1][1] and logged[0][3].startswith("API key sk_")
    # Gone: a second delete or export is a 404.
    again = client.delete("/api/v1/contacts/user:u-42/", **auth(acme))
    assert again.status_code == 404 and again.json()["error"]["code"] == "contact_not_found"


@pytest.mark.parametrize("contact", ["user:u-42", "visitor:v-bob", "nobody:1", "user:", "v-ann", "user:a/b", "t\n^"])
def test_another_tenants_or_no_contact_is_a_404_like_a_missing_one(client, people, contact):
    acme, other, *_ = people
    for method, path in (("get", f"/api/v1/contacts/{contact}/export/"), ("delete", f"/api/v1/contacts/{contact}/")):
        if contact == "user:u-42":  # Acme's Ann, asked with the other tenant's key: only their namesake there
            continue
        answer = getattr(client, method)(path, **auth(other))
        assert answer.status_code == 404 and answer.json()["error"]["code"] == "contact_not_found", (method, path)
    assert client.get("/api/v1/contacts/visitor:v-bob/export/").status_code == 401
    assert Conversation.objects.filter(tenant=acme.tenant).count() == 3


def test_the_retention_purge_deletes_only_idle_conversations_once_and_audits_it(people, attachment_dir,
                                                                               django_capture_on_commit_callbacks):
    acme, other, first, second, bob, namesake = people
    owner = user()
    services.retention_set(tenant=acme.tenant, days=30, actor=audit.Actor.console(owner))
    long_ago = timezone.now() - timedelta(days=31)
    Conversation.objects.filter(pk__in=[first.pk, namesake.pk]).update(updated_at=long_ago)  # other: no period
    with django_capture_on_commit_callbacks(execute=True):  # files go once the deletion commits
        assert services.retention_purge() == {"acme-privacy": 1}
    assert set(Conversation.objects.values_list("pk", flat=True)) == {second.pk, bob.pk, namesake.pk}
    assert Attachment.objects.count() == 0 and not [p for p in attachment_dir.rglob("*") if p.is_file()]
    assert services.retention_purge() == {"acme-privacy": 0}  # idempotent: nothing more
    purges = AuditLog.objects.filter(tenant=acme.tenant, entity="retention", action="purge")
    assert purges.count() == 1 and purges.get().changes["conversations"] == [1, 0]
    assert AuditLog.objects.get(tenant=acme.tenant, entity="retention", action="update").changes == {"days": [None, 30]}
    policy = RetentionPolicy.objects.get(tenant=acme.tenant)
    assert policy.last_purge_count == 0 and policy.last_purge_at is not None
    with pytest.raises(services.RetentionInvalid):
        services.retention_set(tenant=acme.tenant, days=0, actor=audit.Actor.console(owner))


def test_the_console_contact_page_exports_and_deletes_after_confirmation(client, people):
    acme, other, first, second, bob, namesake = people
    owner, viewer = user(), user()
    Membership.objects.create(user=owner, tenant=acme.tenant, role="owner")
    Membership.objects.create(user=viewer, tenant=acme.tenant, role="viewer")
    page = f"/console/t/{acme.tenant.slug}/conversations/{first.pk}/contact/"

    client.force_login(viewer)
    html = client.get(page).content.decode()
    assert "user:u-42" in html and "Delete contact" not in html
    assert client.get(page + "export.json").status_code == 403
    assert client.post(page + "delete/", {"confirm": "on"}).status_code == 403

    client.force_login(owner)
    html = client.get(page).content.decode()
    assert "2 conversations" in html and "Delete contact" in html and "Ann Lee" in html
    exported = json.loads(client.get(page + "export.json").content)
    assert len(exported["conversations"]) == 2
    refused = client.post(page + "delete/")
    assert refused.status_code == 400 and "Tick the box" in refused.content.decode()
    assert Conversation.objects.filter(user_id="u-42", tenant=acme.tenant).count() == 2
    done = client.post(page + "delete/", {"confirm": "on"})
    assert done.status_code == 302 and done["Location"] == f"/console/t/{acme.tenant.slug}/conversations/"
    assert Conversation.objects.filter(user_id="u-42", tenant=acme.tenant).count() == 0
    assert AuditLog.objects.get(tenant=acme.tenant, entity="contact", action="delete").actor == owner
    # Another tenant's conversation: its contact page is missing, like any of its pages.
    assert client.get(f"/console/t/{acme.tenant.slug}/conversations/{namesake.pk}/contact/").status_code == 404


def test_the_privacy_page_sets_the_retention_period_with_a_clear_error(client, people):
    acme, *_ = people
    admin = user()
    Membership.objects.create(user=admin, tenant=acme.tenant, role="admin")
    client.force_login(admin)
    url = f"/console/t/{acme.tenant.slug}/privacy/"
    bad = client.post(url, {"days": "-3"})
    assert bad.status_code == 400 and "greater than or equal to 1" in bad.content.decode()
    assert client.post(url, {"days": "90"}).status_code == 302
    assert RetentionPolicy.objects.get(tenant=acme.tenant).days == 90
    assert client.post(url, {"days": ""}).status_code == 302
    assert RetentionPolicy.objects.get(tenant=acme.tenant).days is None
