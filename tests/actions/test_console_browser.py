"""The actions console in Chromium (Playwright) on Django's test server: an admin adds an
action through the form and reads its secrets once; an agent finds a call awaiting
approval in the inbox as a card, with its arguments, and approves it. Screenshots go to
TANDEM_CONSOLE_SCREENSHOTS when it names a folder (docs/console for the docs)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tandem.actions.models import Action, ActionCall
from tandem.chat.models import Conversation
from tenants.models import Membership
from tests.actions.helpers import action_ids
from tests.browser import signed_in
from tests.console.conftest import user
from tests.factories import make_tenant

pytestmark = pytest.mark.django_db(transaction=True)


def shoot(page, name: str) -> None:
    folder = os.environ.get("TANDEM_CONSOLE_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(folder) / f"{name}.png"), full_page=True)


def test_an_admin_adds_an_action_and_an_agent_approves_a_call_from_the_inbox(live_server, browser):
    from playwright.sync_api import expect

    tenant = make_tenant(slug="shop").tenant
    admin, agent = user(username="ada"), user(username="grace", first_name="Grace")
    Membership.objects.create(user=admin, tenant=tenant, role="admin")
    Membership.objects.create(user=agent, tenant=tenant, role="agent")

    page = signed_in(browser, live_server.url, "ada", viewport={"width": 1280, "height": 1000})
    page.goto(f"{live_server.url}/console/t/shop/")
    page.get_by_role("link", name="Actions", exact=True).click()
    form = page.get_by_role("form", name="Add an action")
    form.locator("#id_name").fill("order_status")
    form.get_by_label("Description").fill("Look up an order's delivery state by its id.")
    form.get_by_label("Status line").fill("Looking up your order…")
    form.get_by_label("Parameters (JSON schema)").fill(
        '{"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]}')
    form.locator("#id_url_template").fill("https://{order_id}.shop.example/")
    form.get_by_label("Secret header name").fill("Authorization")
    form.get_by_label("Secret header value").fill("Bearer sk-shop-1")
    form.get_by_role("button", name="Add action").click()
    expect(page.get_by_role("alert").filter(has_text="scheme and host are fixed")).to_be_visible()
    form = page.get_by_role("form", name="Add an action")
    form.locator("#id_url_template").fill("https://shop.example/api/orders/{order_id}")
    form.get_by_label("Secret header value").fill("Bearer sk-shop-1")
    form.get_by_role("button", name="Add action").click()
    assert page.locator("#action-signing-secret").inner_text().startswith("acsec_")
    assert page.locator("#action-secret-header").inner_text() == "Bearer sk-shop-1"
    shoot(page, "action-created")
    page.goto(f"{live_server.url}/console/t/shop/actions/")
    expect(page.get_by_role("link", name="order_status")).to_be_visible()
    page.get_by_role("link", name="order_status").click()
    expect(page.locator("#action-signing-secret")).to_have_count(0)
    assert "sk-shop-1" not in page.content()
    Action.objects.filter(tenant=tenant).delete()

    conversation = Conversation.objects.create(tenant=tenant, channel="widget", visitor_id="v-1")
    ids = action_ids(tenant, conversation)
    agent_page = signed_in(browser, live_server.url, "grace")
    agent_page.goto(f"{live_server.url}/console/t/shop/inbox/")
    card = agent_page.get_by_role("article", name="Approval: order_status")
    expect(card).to_be_visible()
    expect(card).to_contain_text("order_id")
    shoot(agent_page, "action-approval")
    card.get_by_role("button", name="Approve").click()
    expect(agent_page.get_by_text("Approved: order_status runs now.")).to_be_visible()
    expect(agent_page.get_by_role("article", name="Approval: order_status")).to_have_count(0)
    call = ActionCall.objects.get(pk=ids["call_id"])
    assert call.status == "queued" and call.decided_by == agent
    agent_page.context.close()
    page.context.close()
