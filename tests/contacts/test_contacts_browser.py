"""A contact exported and deleted in Chromium, from a conversation's page in the console:
the owner opens the contact, downloads the export, confirms the deletion in the page and
in the browser's dialog, and nothing of the contact is left (rows, files), while the
usage records stay. The screenshot goes to TANDEM_CONTACT_SCREENSHOTS when it names a
folder (docs/img/contact-page.png is the one docs/privacy.md shows)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from tandem.attachments import services as attachments
from tandem.attachments.models import Attachment
from tandem.chat.models import Conversation, Message
from tandem.chat.visitors import Visitor
from tenants.models import AuditLog, Membership, UsageRecord
from tests.browser import signed_in
from tests.console.conftest import user
from tests.factories import make_tenant

from .conftest import PNG
from .test_contacts import a_conversation

pytestmark = pytest.mark.django_db(transaction=True)


def test_an_owner_exports_a_contact_then_deletes_it_and_nothing_of_theirs_is_left(live_server, browser,
                                                                                  attachment_dir, tmp_path):
    from playwright.sync_api import expect

    out = Path(os.environ.get("TANDEM_CONTACT_SCREENSHOTS") or tmp_path)
    acme = make_tenant(slug="acme-contact").tenant
    acme.name = "Acme Outdoor"
    acme.save(update_fields=["name"])
    owner = user(username="olga", first_name="Olga")
    Membership.objects.create(user=owner, tenant=acme, role=Membership.Role.OWNER)
    ann = {"user_id": "u-42", "user_verified": True, "user_name": "Ann Lee", "user_email": "ann@example.test",
           "visitor_id": "v-ann"}
    first = a_conversation(acme, "My tent pole snapped", **ann)
    a_conversation(acme, "Can I get a refund?", **ann)
    bob = a_conversation(acme, "Opening hours?", visitor_id="v-bob")
    visitor = Visitor(visitor_id="v-ann", user_id="u-42", verified=True)
    upload = attachments.attachment_upload(tenant=acme, upload=SimpleUploadedFile("pole.png", PNG),
                                           sender="visitor", owner=visitor.subject)
    attachments.visitor_attachment_send(tenant=acme, visitor=visitor, attachment_id=upload.pk, conversation=first)
    stored = attachment_dir / Attachment.objects.get().path
    assert stored.exists()

    page = signed_in(browser, live_server.url, owner.username, accept_downloads=True)
    try:
        page.goto(f"{live_server.url}/console/t/{acme.slug}/conversations/{first.pk}/")
        page.get_by_role("link", name="Contact's data").click()
        expect(page.get_by_role("heading", level=2)).to_have_text("Contact Ann Lee")
        expect(page.locator("#contact-counts")).to_have_text("2 conversations, 5 messages")
        out.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(out / "contact-page.png"), full_page=True)

        with page.expect_download() as download:
            page.get_by_role("link", name="Export (JSON)").click()
        exported = json.loads(Path(download.value.path()).read_text())
        assert exported["contact"]["id"] == "user:u-42" and len(exported["conversations"]) == 2
        assert download.value.suggested_filename == "acme-contact-contact-export.json"

        page.get_by_role("button", name="Delete contact").click()  # not ticked: the browser refuses it
        assert Conversation.objects.filter(tenant=acme, user_id="u-42").count() == 2
        page.get_by_label("Yes, delete everything of this contact. This cannot be undone.").check()
        page.once("dialog", lambda dialog: dialog.accept())
        page.get_by_role("button", name="Delete contact").click()
        expect(page).to_have_url(f"{live_server.url}/console/t/{acme.slug}/conversations/")
        expect(page.get_by_text("Contact deleted: 2 conversations, 5 messages and 1 attachment.")).to_be_visible()
    finally:
        page.context.close()

    assert Conversation.objects.filter(tenant=acme, user_id="u-42").count() == 0
    assert Message.objects.filter(conversation__tenant=acme).exclude(conversation=bob).count() == 0
    assert Attachment.objects.count() == 0 and not stored.exists()
    assert UsageRecord.objects.filter(tenant=acme).count() == 3
    record = AuditLog.objects.get(tenant=acme, entity="contact", action="delete")
    assert record.actor == owner and "u-42" not in record.entity_id + record.summary
