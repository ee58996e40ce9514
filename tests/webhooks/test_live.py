"""Webhooks on the running platform (daphne, CPU, prefill and decode workers on the real
model) with a webhooks worker and a receiver on 127.0.0.1: a widget conversation's
events arrive signed, and in Chromium an admin manages an endpoint, sends a test event
and reads its delivery log."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tandem.webhooks import services
from tests.browser import signed_in
from tests.console.conftest import user
from tests.factories import make_tenant
from tests.platform_fixtures import chat_socket

from .test_delivery import documented_verifier

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.real_model]


def test_a_widget_conversation_sends_conversation_created_and_both_messages_signed(
        platform, webhooks_worker, receiver, allow_loopback):
    created = make_tenant()
    made = services.endpoint_create(tenant=created.tenant, url=receiver.url,
                                    events=["conversation.created", "message.created"])
    with chat_socket(platform, created.widget_key.plaintext) as chat:
        message_id, frames = chat.ask("Hello there")
    assert frames[-1]["type"] == "end", frames[-1]
    got = receiver.wait_for(3)
    verify = documented_verifier()
    assert all(verify(made.secret, r.headers["tandem-signature"], r.body) for r in got)
    events = sorted((r.event for r in got), key=lambda e: (e["type"], e["data"].get("message", {}).get("role", "")))
    assert [e["type"] for e in events] == ["conversation.created", "message.created", "message.created"]
    assistant, visitor = events[1]["data"]["message"], events[2]["data"]["message"]
    assert visitor["role"] == "visitor" and visitor["content"] == "Hello there"
    assert assistant["role"] == "assistant" and assistant["id"] == message_id and assistant["status"] == "done"
    assert assistant["content"] and assistant["conversation"] == visitor["conversation"] == \
        events[0]["data"]["conversation"]["id"]
    assert len({e["id"] for e in events}) == 3  # once each


def test_in_chromium_an_admin_adds_an_endpoint_sends_a_test_event_and_reads_the_delivery_log(
        platform, webhooks_worker, receiver, allow_loopback, browser, tmp_path):
    from playwright.sync_api import expect

    from tenants.models import Membership

    tenant = make_tenant(slug="hooks-browser").tenant
    owner = user()
    Membership.objects.create(tenant=tenant, user=owner, role="owner")
    page = signed_in(browser, platform.base_url, owner.username, timeout_ms=30_000)
    page.goto(f"{platform.base_url}/console/t/{tenant.slug}/")
    page.get_by_role("link", name="Webhooks", exact=True).click()
    form = page.get_by_role("form", name="Add an endpoint")
    # The platform's web process allows no private address: refused beside the field.
    form.get_by_label("Endpoint URL").fill(receiver.url)
    form.get_by_role("button", name="Add endpoint").click()
    expect(page.get_by_role("alert").filter(has_text="loopback")).to_be_visible()
    form = page.get_by_role("form", name="Add an endpoint")
    form.get_by_label("Endpoint URL").fill("https://hooks.example.com/tandem")
    form.get_by_label("Description").fill("CRM")
    form.get_by_role("button", name="Add endpoint").click()
    secret = page.locator("#webhook-secret").inner_text()
    assert secret.startswith("whsec_")
    # Rendered, not redirected (as keys are): the secret exists in that response alone.
    page.goto(f"{platform.base_url}/console/t/{tenant.slug}/webhooks/")
    page.get_by_role("link", name="https://hooks.example.com/tandem").click()
    expect(page.get_by_role("heading", name="https://hooks.example.com/tandem")).to_be_visible()
    expect(page.locator("#webhook-secret")).to_have_count(0)
    # The receiver's endpoint, allowed by the operator for the worker (and this process).
    endpoint = services.endpoint_create(tenant=tenant, url=receiver.url, events=["reply.failed"],
                                        description="Receiver").endpoint
    url = f"{platform.base_url}/console/t/{tenant.slug}/webhooks/{endpoint.pk}/"
    page.goto(url)
    page.get_by_role("button", name="Send test event").click()
    [got] = receiver.wait_for(1)
    row = page.locator("table[aria-label=Deliveries] tbody tr").first
    for _ in range(50):
        # A fresh navigation, not a reload: the button's own navigation may still be under
        # way, and reloading a page being replaced fails ("Not attached to an active page").
        page.goto(url)
        if "succeeded" in row.inner_text():
            break
    expect(row.locator(".badge")).to_have_text("succeeded")
    expect(row).to_contain_text("200")
    expect(row).to_contain_text(got.event["id"])
    shots = Path(os.environ.get("TANDEM_CONSOLE_SCREENSHOTS", tmp_path))
    shots.mkdir(parents=True, exist_ok=True)
    row.get_by_text("Body sent").click()
    page.screenshot(path=str(shots / "webhook.png"), full_page=True)
    row.get_by_role("button", name=f"Resend {got.event['id']}").click()
    second = receiver.wait_for(2)[1]
    assert second.body == got.body
    page.goto(f"{platform.base_url}/console/t/{tenant.slug}/webhooks/")
    expect(page.get_by_role("link", name=receiver.url)).to_be_visible()
    page.screenshot(path=str(shots / "webhooks.png"), full_page=True)
    page.context.close()
