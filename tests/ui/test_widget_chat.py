"""The embedded widget's conversation in a real browser: streaming, persistence across
reloads and tabs, starting over."""

from __future__ import annotations

import pytest

from tandem.chat.models import Conversation, Message
from tests.factories import make_tenant
from tests.ui.conftest import embed_page, wait_for_event

pytestmark = pytest.mark.django_db(transaction=True)

# Every bubble's text and the typing indicator, as the DOM changes (MutationObserver:
# each change the widget makes, no polling).
WATCH = """() => {
  const root = document.querySelector("tandem-chat").shadowRoot;
  window.__texts = []; window.__statuses = [];
  new MutationObserver(() => {
    const bubbles = root.querySelectorAll(".msg.assistant");
    const last = bubbles[bubbles.length - 1].textContent;
    if (window.__texts[window.__texts.length - 1] !== last) window.__texts.push(last);
    const status = root.querySelector("[role=status]").textContent;
    if (status && window.__statuses[window.__statuses.length - 1] !== status) window.__statuses.push(status);
  }).observe(root, {subtree: true, childList: true, characterData: true});
}"""


def test_a_visitor_opens_the_widget_sends_a_message_and_sees_the_reply_stream(platform, context, host_site):
    from playwright.sync_api import expect

    tenant = make_tenant(origins=[host_site.origin], max_output_tokens=24)
    page = context.new_page()
    page.goto(host_site.page("/stream", embed_page(platform, tenant.widget_key.plaintext)))
    page.get_by_role("button", name="Open chat").click()
    box = page.get_by_role("textbox", name="Message")
    expect(box).to_be_focused()
    page.evaluate(WATCH)
    box.fill("Hello! What are your opening hours?")
    page.get_by_role("button", name="Send").click()
    expect(page.get_by_role("button", name="Stop")).to_be_visible()
    reply = wait_for_event(page, "message", role="assistant")[0]

    stored = Message.objects.get(role="assistant", conversation__tenant=tenant.tenant)
    assert stored.status == "done" and stored.content.strip()
    assert reply["text"] == stored.content  # every token once, in order
    texts = [t for t in page.evaluate("window.__texts") if t]
    assert len(texts) >= 4, texts  # it grew over several renders before it ended
    assert "The assistant is typing…" in page.evaluate("window.__statuses")
    expect(page.get_by_role("button", name="Stop")).to_be_hidden()
    # Screen readers hear the finished reply.
    live = page.locator("tandem-chat [aria-live=polite]")
    expect(live).to_contain_text(stored.content.strip()[:20])
    assert Conversation.objects.get(tenant=tenant.tenant).visitor_id
