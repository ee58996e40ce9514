"""The visitor's side of an action in a real browser (Chromium) against the running
platform and an actions worker: the widget shows the action's status line where the
call would be (never the call), then the reply that continues with the result."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tandem.actions import services
from tests.factories import make_tenant
from tests.ui.conftest import context, embed_page, host_site  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.real_model]
# docs/widget/action-status.png, refreshed on purpose only (TANDEM_SCREENSHOTS=1)
SHOT = (Path(__file__).resolve().parents[2] / "docs" / "widget" if os.environ.get("TANDEM_SCREENSHOTS") == "1"
        else Path("/tmp")) / "action-status.png"


def test_the_widget_shows_the_status_line_then_the_reply_after_the_action(
        platform, grammar_warm, actions_worker, endpoint, allow_loopback, context, host_site):  # noqa: F811
    from playwright.sync_api import expect

    site = make_tenant(origins=[host_site.origin], max_output_tokens=48)
    services.action_create(
        tenant=site.tenant, by=None, name="order_status", description="Look up an order by its id.",
        status_text="Looking up your order…", who="anyone", trigger_phrases="my order", method="GET",
        url_template=f"{endpoint.url}/orders/{{order_id}}",
        parameters={"type": "object", "properties": {"order_id": {"type": "string", "maxLength": 8}},
                    "required": ["order_id"], "additionalProperties": False})
    page = context.new_page()
    page.goto(host_site.page("/orders", embed_page(platform, site.widget_key.plaintext)))
    page.get_by_role("button", name="Open chat").click()
    page.get_by_role("textbox", name="Message", exact=True).fill("Where is my order A-17?")
    page.keyboard.press("Enter")
    widget = page.locator("tandem-chat")
    expect(widget.locator(".msg.action")).to_have_text("Looking up your order…", timeout=60_000)
    endpoint.wait_for(1)
    reply = widget.locator(".msg.assistant").last
    expect(reply).not_to_be_empty(timeout=60_000)
    expect(widget.locator(".msg.assistant .fb").last).to_be_visible(timeout=60_000)  # ended: rated
    assert "tool_call" not in widget.inner_text()
    page.screenshot(path=SHOT)
