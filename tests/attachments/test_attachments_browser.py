"""An attachment both ways in Chromium, on the demo page against the running platform: the
visitor attaches a picture with the paperclip and sees it in place; the agent, signed in
to the inbox, sees it too and sends a picture back, which the visitor's widget previews
as it arrives. An outsider gets nothing: another visitor's socket cannot send or read
the first visitor's files, and an expired or altered link is refused. Screenshots go to
TANDEM_ATTACHMENT_SCREENSHOTS when it names a folder (docs/img for the docs)."""

from __future__ import annotations

import os
import struct
import time
import zlib
from pathlib import Path

import pytest
from django.core import signing

from tandem.attachments import links
from tandem.attachments.models import Attachment
from tandem.chat.models import Conversation
from tandem.handoff import states
from tenants.models import Membership
from tests.browser import sign_in
from tests.console.conftest import user
from tests.factories import make_tenant
from tests.platform_fixtures import chat_socket

pytestmark = pytest.mark.django_db(transaction=True)


def png(width: int, height: int, rgb: tuple[int, int, int]) -> bytes:
    """A real PNG of one colour (what a browser decodes and shows)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = b"".join(b"\x00" + bytes(rgb) * width for _ in range(height))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


class Past(signing.TimestampSigner):
    def timestamp(self):
        return signing.b62_encode(int(time.time()) - 2 * 3600)


def test_an_attachment_goes_both_ways_and_an_outsider_is_refused(platform, browser, tmp_path):
    from playwright.sync_api import expect

    out = Path(os.environ.get("TANDEM_ATTACHMENT_SCREENSHOTS") or tmp_path)
    out.mkdir(parents=True, exist_ok=True)
    created = make_tenant(origins=[platform.base_url])
    tenant = created.tenant
    tenant.widget_title = "Fjordline help"
    tenant.save()
    maya = user(username="maya-files", first_name="Maya")
    Membership.objects.create(user=maya, tenant=tenant, role=Membership.Role.AGENT)
    (tmp_path / "pole.png").write_bytes(png(160, 100, (200, 60, 40)))
    (tmp_path / "map.png").write_bytes(png(120, 120, (40, 120, 200)))

    visitor_ctx = browser.new_context(viewport={"width": 1280, "height": 800}, reduced_motion="reduce")
    agent_ctx = browser.new_context(viewport={"width": 1280, "height": 900})
    outsider_ctx = browser.new_context()
    try:
        page = visitor_ctx.new_page()
        page.set_default_timeout(30_000)
        page.goto(f"{platform.base_url}/demo/{tenant.slug}/")
        page.get_by_role("button", name="Open chat").click()
        with page.expect_file_chooser() as chooser:
            page.get_by_role("button", name="Attach a file").click()
        chooser.value.set_files(str(tmp_path / "pole.png"))
        mine = page.locator("tandem-chat .msg.user img")
        expect(mine).to_be_visible()
        expect(mine).to_have_attribute("alt", "pole.png")
        page.wait_for_function("() => document.querySelector('tandem-chat').shadowRoot"
                               ".querySelector('.msg.user img').naturalWidth === 160")
        conv = Conversation.objects.get(tenant=tenant)
        sent = Attachment.objects.get(conversation=conv)
        assert (sent.sender, sent.content_type, sent.message.role) == ("visitor", "image/png", "user")

        # The agent claims it, sees the picture, and sends one back.
        states.conversation_claim(conversation=conv, agent=maya)
        agent = agent_ctx.new_page()
        agent.set_default_timeout(30_000)
        sign_in(agent, platform.base_url, maya.username)
        agent.goto(f"{platform.base_url}/console/t/{tenant.slug}/inbox/{conv.pk}/")
        theirs = agent.locator("#transcript img[alt='pole.png']")
        expect(theirs).to_be_visible()
        assert theirs.evaluate("i => i.naturalWidth") == 160
        agent.get_by_label("Send a file to the visitor").set_input_files(str(tmp_path / "map.png"))
        agent.get_by_role("button", name="Send file").click()
        expect(agent.locator("#transcript img[alt='map.png']")).to_be_visible()

        back = page.locator("tandem-chat .msg.agent img")
        expect(back).to_have_attribute("alt", "map.png")
        page.wait_for_function("() => document.querySelector('tandem-chat').shadowRoot"
                               ".querySelector('.msg.agent img').naturalWidth === 120")
        reply = Attachment.objects.get(sender="agent")
        assert reply.message.author_name == "Maya" and reply.conversation_id == conv.pk

        # A file that is not a picture, sent while the agent's page is open: it arrives there
        # live, and both sides get a link that downloads it.
        (tmp_path / "order.txt").write_text("Order 1042: tent, two poles\n")
        with page.expect_file_chooser() as chooser:
            page.get_by_role("button", name="Attach a file").click()
        chooser.value.set_files(str(tmp_path / "order.txt"))
        expect(page.locator("tandem-chat .msg.user a", has_text="order.txt")).to_be_visible()
        arrived = agent.locator("#transcript .attachment.file a", has_text="order.txt")
        expect(arrived).to_be_visible()
        download = agent.request.get(platform.base_url + arrived.get_attribute("href"))
        assert download.headers["content-disposition"] == 'attachment; filename="order.txt"'
        assert download.headers["content-type"] == "text/plain; charset=utf-8"
        assert download.text() == "Order 1042: tent, two poles\n"
        agent.screenshot(path=str(out / "attachments-inbox.png"), full_page=True)
        page.screenshot(path=str(out / "attachments-widget.png"))

        # A reload restores both pictures from the transcript, behind fresh links.
        page.reload()
        expect(page.locator("tandem-chat .msg img")).to_have_count(2)

        # An outsider: an expired or altered link serves nothing.
        outsider = outsider_ctx.new_page()
        expired = outsider.goto(f"{platform.base_url}/attachments/{Past(salt=links.SALT).sign_object(str(reply.pk))}/")
        assert expired.status == 403 and "expired" in outsider.content()
        token = links.attachment_url(reply.pk).split("/")[2]
        assert outsider.goto(f"{platform.base_url}/attachments/{token[:-3]}abc/").status == 404
        assert outsider.goto(f"{platform.base_url}{links.attachment_url(reply.pk)}").status == 200  # the same link, fresh
    finally:
        for ctx in (visitor_ctx, agent_ctx, outsider_ctx):
            ctx.close()

    # Another visitor's socket can neither send the first visitor's upload nor read their
    # conversation (and so never gets a link to its files).
    pending = Attachment.objects.create(tenant=tenant, sender="visitor", owner=f"visitor:{conv.visitor_id}",
                                        path=sent.path, name="unsent.png", content_type="image/png", size=1,
                                        sha256="0" * 64)
    with chat_socket(platform, created.widget_key.plaintext, origin=platform.base_url) as other:
        other.send({"type": "attachment", "attachment": str(pending.pk), "conversation": None})
        assert other.recv()["code"] == "attachment_not_found"
        other.send({"type": "attachment", "attachment": str(sent.pk), "conversation": str(conv.pk)})
        assert other.recv()["code"] == "conversation_not_found"
        other.send({"type": "history", "conversation": str(conv.pk)})
        assert other.recv()["code"] == "conversation_not_found"
    assert Attachment.objects.get(pk=pending.pk).message_id is None
