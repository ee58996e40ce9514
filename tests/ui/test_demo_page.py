"""The demo page: a fictional company's site that embeds the widget with the documented
snippet, as a site owner would (Debian's Chromium driven by Playwright)."""

from __future__ import annotations

import pytest

from tests.factories import make_tenant

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_demo_page_embeds_the_widget_with_the_snippet_and_a_visitor_chats_on_it(platform, context):
    from playwright.sync_api import expect

    from tandem.chat.models import Message

    tenant = make_tenant(origins=[platform.base_url], max_output_tokens=12)
    page = context.new_page()
    page.goto(f"{platform.base_url}/demo/{tenant.tenant.slug}/")
    snippet = page.locator("script[data-tandem-key]")
    assert snippet.get_attribute("src") == f"{platform.base_url}/static/tandem/widget.js"
    assert snippet.get_attribute("data-tandem-key") == tenant.widget_key.plaintext
    assert snippet.evaluate("s => s.async") is True
    page.get_by_role("button", name="Open chat").click()
    page.get_by_role("textbox", name="Message").fill("Hello, do you have a returns policy?")
    page.keyboard.press("Enter")
    user = page.locator("tandem-chat .msg.user")
    expect(user).to_have_text("Hello, do you have a returns policy?")
    stop = page.get_by_role("button", name="Stop")
    expect(stop).to_be_visible()
    expect(stop).to_be_hidden(timeout=120_000)
    reply = Message.objects.get(role="assistant", conversation__tenant=tenant.tenant)
    assert reply.status == "done" and reply.content.strip(), (reply.status, reply.error)
    bubble = page.locator("tandem-chat .msg.assistant").last
    assert bubble.inner_text().split()[:3] == reply.content.split()[:3]


def test_the_demo_page_of_an_unknown_tenant_is_404(platform, context):
    page = context.new_page()
    response = page.goto(f"{platform.base_url}/demo/no-such-tenant/")
    assert response.status == 404
