"""Attachments without a browser (docs/attachments.md): a file's kind is read from its
bytes; the widget's upload checks key, origin, visitor and the tenant's limits, each
refusal with its status and code; a signed link serves the file with headers that never
let it run, and an expired, altered or unsent one serves nothing; an agent sends only
on a conversation they own; the tenant's limits are validated and audited."""

from __future__ import annotations

import time

import pytest
from django.core import signing
from django.core.files.uploadedfile import SimpleUploadedFile

from tandem.attachments import kinds, links, services
from tandem.attachments.models import Attachment, AttachmentPolicy
from tandem.chat.models import Conversation
from tandem.chat.visitors import Visitor, visitor_token_for
from tandem.handoff import states
from tenants import audit
from tenants.models import AuditLog, Membership
from tests.console.conftest import user
from tests.factories import make_tenant

from .conftest import PDF, PNG

pytestmark = pytest.mark.django_db
ORIGIN = "https://shop.example.com"


@pytest.mark.parametrize("name,data,expected", [
    ("cat.png", PNG, ("image", "image/png")),
    ("cat.txt", PNG, ("image", "image/png")),  # the bytes decide, not the name
    ("photo.jpg", b"\xff\xd8\xff\xe0" + b"\0" * 20, ("image", "image/jpeg")),
    ("a.gif", b"GIF89a" + b"\0" * 20, ("image", "image/gif")),
    ("a.webp", b"RIFF\0\0\0\0WEBPVP8 " + b"\0" * 8, ("image", "image/webp")),
    ("invoice.pdf", PDF, ("pdf", "application/pdf")),
    ("notes.txt", "Grüße\n".encode(), ("text", "text/plain")),
    ("rows.csv", b"a,b\n1,2\n", ("text", "text/csv")),
    ("page.png", b"<html><script>alert(1)</script>", None),  # HTML is never taken
    ("logo.svg", b"<svg xmlns='http://www.w3.org/2000/svg'/>", None),  # SVG can carry script
    ("notes.txt", b"\x00\x01binary", None),
    ("notes.txt", b"\xff\xfe not utf-8", None),
    ("run.exe", b"MZ\x90\x00" + b"\0" * 20, None),
])
def test_a_files_kind_is_read_from_its_bytes(name, data, expected):
    found = kinds.sniff(data[:64], name=name, whole=data)
    assert (found and (found.kind, found.content_type)) == (expected or None)


@pytest.fixture
def shop(attachment_dir):
    return make_tenant(slug="shop-files", origins=[ORIGIN])


def upload(client, shop, data=PNG, name="pole.png", *, visitor="v-1", origin=ORIGIN, key=None):
    form = {"file": SimpleUploadedFile(name, data)}
    if visitor:
        form["visitor"] = visitor_token_for(tenant=shop.tenant, visitor_id=visitor)
    return client.post(f"/chat/attachments/?key={key or shop.widget_key.plaintext}", form, HTTP_ORIGIN=origin)


def test_a_visitor_uploads_from_an_allowed_origin_and_the_file_is_kept_for_them(client, shop, attachment_dir):
    answer = upload(client, shop)
    assert answer.status_code == 201, answer.content
    assert answer["Access-Control-Allow-Origin"] == ORIGIN
    body = answer.json()["attachment"]
    assert (body["name"], body["content_type"], body["size"], body["kind"]) == ("pole.png", "image/png", len(PNG),
                                                                               "image")
    assert "url" not in body  # no link before it is sent into a conversation
    row = Attachment.objects.get(pk=body["id"])
    assert (row.owner, row.sender, row.message_id) == ("visitor:v-1", "visitor", None)
    assert (attachment_dir / row.path).read_bytes() == PNG


@pytest.mark.parametrize("case,status,code", [
    ("wrong origin", 403, "origin_not_allowed"),
    ("no visitor", 401, "invalid_visitor"),
    ("bad key", 401, "invalid_api_key"),
    ("html", 400, "file_type_not_allowed"),
    ("too big", 413, "file_too_large"),
    ("empty", 400, "empty_file"),
    ("turned off", 400, "attachments_disabled"),
    ("pdf not allowed", 400, "file_type_not_allowed"),
])
def test_an_upload_refused_says_why_and_keeps_nothing(client, shop, case, status, code):
    AttachmentPolicy.objects.create(tenant=shop.tenant, max_bytes=1000, enabled=case != "turned off",
                                    kinds=["image"] if case == "pdf not allowed" else ["image", "pdf", "text"])
    answer = {
        "wrong origin": lambda: upload(client, shop, origin="https://evil.example"),
        "no visitor": lambda: upload(client, shop, visitor=None),
        "bad key": lambda: upload(client, shop, key="pk_nope"),
        "html": lambda: upload(client, shop, b"<html></html>", "x.png"),
        "too big": lambda: upload(client, shop, PNG + b"\0" * 2000),
        "empty": lambda: upload(client, shop, b"", "x.txt"),
        "turned off": lambda: upload(client, shop),
        "pdf not allowed": lambda: upload(client, shop, PDF, "x.pdf"),
    }[case]()
    assert (answer.status_code, answer.json()["error"]["code"]) == (status, code)
    assert Attachment.objects.count() == 0


def test_a_visitor_holds_a_bounded_number_of_unsent_uploads(client, shop):
    for _ in range(services.PENDING_PER_VISITOR):
        assert upload(client, shop).status_code == 201
    refused = upload(client, shop)
    assert (refused.status_code, refused.json()["error"]["code"]) == (400, "too_many_uploads")
    assert upload(client, shop, visitor="v-2").status_code == 201  # per visitor


def sent_file(shop, data=PNG, name="pole.png"):
    visitor = Visitor(visitor_id="v-1")
    row = services.attachment_upload(tenant=shop.tenant, upload=SimpleUploadedFile(name, data), sender="visitor",
                                     owner=visitor.subject)
    msg, row = services.visitor_attachment_send(tenant=shop.tenant, visitor=visitor, attachment_id=row.pk,
                                                conversation=None, text="")
    return msg, row


def test_a_signed_link_serves_the_file_so_that_it_never_runs(client, shop):
    _, picture = sent_file(shop)
    _, notes = sent_file(shop, b"<script>alert(1)</script>\n", "notes.txt")
    shown = client.get(links.attachment_url(picture.pk))
    assert shown.status_code == 200 and b"".join(shown.streaming_content) == PNG
    assert shown["Content-Type"] == "image/png" and shown["Content-Disposition"].startswith("inline")
    downloaded = client.get(links.attachment_url(notes.pk))
    assert downloaded["Content-Type"] == "text/plain; charset=utf-8"
    assert downloaded["Content-Disposition"] == 'attachment; filename="notes.txt"'
    for response in (shown, downloaded):
        assert response["X-Content-Type-Options"] == "nosniff"
        assert response["Content-Security-Policy"] == "default-src 'none'; sandbox"
        assert response["Cross-Origin-Resource-Policy"] == "cross-origin"


class Past(signing.TimestampSigner):
    def timestamp(self):
        return signing.b62_encode(int(time.time()) - 7200)


def test_an_expired_altered_or_unsent_link_serves_nothing(client, shop, settings):
    _, picture = sent_file(shop)
    settings.TANDEM_ATTACHMENT_URL_MAX_AGE_S = 3600
    expired = Past(salt=links.SALT).sign_object(str(picture.pk))
    answer = client.get(f"/attachments/{expired}/")
    assert answer.status_code == 403 and b"expired" in answer.content
    token = links.attachment_url(picture.pk).split("/")[2]
    assert client.get(f"/attachments/{token[:-2]}xx/").status_code == 404
    forged = signing.dumps(str(picture.pk), salt="another.salt")
    assert client.get(f"/attachments/{forged}/").status_code == 404
    unsent = services.attachment_upload(tenant=shop.tenant, upload=SimpleUploadedFile("a.png", PNG),
                                        sender="visitor", owner="visitor:v-1")
    assert client.get(links.attachment_url(unsent.pk)).status_code == 404


def test_another_visitor_cannot_send_an_upload_that_is_not_theirs(shop):
    from tenants.access import NotFound

    row = services.attachment_upload(tenant=shop.tenant, upload=SimpleUploadedFile("a.png", PNG), sender="visitor",
                                     owner="visitor:v-1")
    with pytest.raises(NotFound) as refused:
        services.visitor_attachment_send(tenant=shop.tenant, visitor=Visitor(visitor_id="v-2"), attachment_id=row.pk,
                                         conversation=None)
    assert refused.value.code == "attachment_not_found"
    assert Attachment.objects.get(pk=row.pk).message_id is None and Conversation.objects.count() == 0


def test_an_agent_sends_a_file_only_on_a_conversation_they_own(client, shop):
    maya, other_agent = user(first_name="Maya"), user()
    for u in (maya, other_agent):
        Membership.objects.create(user=u, tenant=shop.tenant, role="agent")
    conv = Conversation.objects.create(tenant=shop.tenant, channel="widget", visitor_id="v-1")
    states.conversation_claim(conversation=conv, agent=maya)
    url = f"/console/t/{shop.tenant.slug}/inbox/{conv.pk}/attach/"

    client.force_login(other_agent)
    refused = client.post(url, {"file": SimpleUploadedFile("a.pdf", PDF)}, HTTP_ACCEPT="application/json")
    assert refused.status_code == 409 and refused.json()["code"] == "not_assigned"
    client.force_login(maya)
    bad = client.post(url, {"file": SimpleUploadedFile("a.html", b"<html>")}, HTTP_ACCEPT="application/json")
    assert bad.status_code == 400 and bad.json()["code"] == "file_type_not_allowed"
    sent = client.post(url, {"file": SimpleUploadedFile("label.pdf", PDF), "text": "Your return label"},
                       HTTP_ACCEPT="application/json")
    assert sent.status_code == 200, sent.content
    message = sent.json()["message"]
    assert (message["role"], message["text"], message["author"]) == ("agent", "Your return label", "Maya")
    assert message["attachments"][0]["name"] == "label.pdf" and message["attachments"][0]["kind"] == "file"
    assert Attachment.objects.get().message.conversation_id == conv.pk
    # The inbox page shows it behind a link that serves it.
    html = client.get(f"/console/t/{shop.tenant.slug}/inbox/{conv.pk}/").content.decode()
    link = html.split('class="attachment file"><a href="')[1].split('"')[0]
    assert client.get(link)["Content-Disposition"] == 'attachment; filename="label.pdf"'


def test_the_tenants_limits_are_validated_and_audited(client, shop):
    owner = user()
    Membership.objects.create(user=owner, tenant=shop.tenant, role="owner")
    with pytest.raises(services.PolicyInvalid):
        services.policy_update(tenant=shop.tenant, actor=audit.Actor.console(owner), enabled=True,
                               kinds_allowed=["exe"], max_bytes=100)
    client.force_login(owner)
    url = f"/console/t/{shop.tenant.slug}/attachments/"
    assert client.post(url, {"enabled": "on", "kinds": ["image"], "max_mb": "500"}).status_code == 400
    assert client.post(url, {"enabled": "on", "kinds": ["image", "pdf"], "max_mb": "2"}).status_code == 302
    policy = AttachmentPolicy.objects.get(tenant=shop.tenant)
    assert (policy.enabled, policy.kinds, policy.max_bytes) == (True, ["image", "pdf"], 2 * 1024 * 1024)
    assert AuditLog.objects.filter(tenant=shop.tenant, entity="attachments").count() == 1
    config = client.get(f"/widget/config?key={shop.widget_key.plaintext}", HTTP_ORIGIN=ORIGIN).json()
    assert config["attachments"]["kinds"] == ["image", "pdf"] and config["attachments"]["max_bytes"] == 2097152
