"""Finding and sorting conversations in a real browser (Chromium driven by Playwright) on
Django's test server: an admin answering in the inbox searches it and finds a message
(its words marked), labels a conversation from its page and filters the inbox by that
label, ticks two conversations and labels them at once, sees visitors by the friendly
name made from their id with the side panel of the page and browser they came with,
and adds a label on the Labels page. Screenshots go to TANDEM_CONSOLE_SCREENSHOTS when
it names a folder (docs/console for the docs)."""

from __future__ import annotations

import pytest

from tandem.chat.models import Conversation, Message
from tandem.handoff import inbox
from tandem.labels.services import label_create
from tenants.models import Membership
from tests.browser import signed_in
from tests.factories import make_tenant
from tests.world import user, waiting

pytestmark = pytest.mark.django_db(transaction=True)
FIREFOX = "Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0"


def test_an_agent_searches_labels_and_filters_the_inbox(live_server, browser, shoot):
    from playwright.sync_api import expect

    acme = make_tenant(slug="acme-find").tenant
    acme.name = "Acme Outdoor"
    acme.save(update_fields=["name"])
    maya = user(username="maya-find", first_name="Maya")
    # An admin: she answers in the inbox and may define the tenant's labels too.
    Membership.objects.create(user=maya, tenant=acme, role=Membership.Role.ADMIN)
    label_create(tenant=acme, name="Refund", color="amber")
    label_create(tenant=acme, name="Shipping", color="blue")
    tent = waiting(acme, "My tent pole snapped on day one", user_name="Ann Lee")
    Message.objects.create(conversation=tent, role=Message.Role.USER, content="Can I get a refund for the tent?")
    norway = waiting(acme, "Do you ship to Norway?", visitor_id="9c1e0f3a77b2", page_url="https://acme.example/shipping",
                     user_agent=FIREFOX)
    boots = waiting(acme, "Boots arrived in the wrong size", user_email="bo@example.test")
    friendly = inbox.visitor_name(norway)

    page = signed_in(browser, live_server.url, maya.username)
    expect(page).to_have_url(f"{live_server.url}/console/t/{acme.slug}/inbox/")

    # The visitor who told us nothing goes by a friendly name, never the hex id.
    expect(page.locator(f"tr[data-conversation='{norway.pk}']")).to_contain_text(friendly)
    expect(page.locator("#inbox-rows")).not_to_contain_text("9c1e0f3a77b2")

    # Search finds a message, its words marked; the other conversations go.
    search = page.get_by_role("search", name="Search conversations")
    search.get_by_label("Search").fill("refund tent")
    search.get_by_role("button", name="Search").click()
    row = page.locator(f"tr[data-conversation='{tent.pk}']")
    expect(row).to_contain_text("Can I get a refund for the tent?")
    expect(row.locator("mark")).to_have_text(["refund", "tent"])
    expect(page.locator("#inbox-rows tbody tr")).to_have_count(1)
    shoot(page, "inbox-search")

    # Labels set from the conversation's page (no reload), then the inbox filtered by one.
    page.get_by_role("link", name="Clear").click()
    page.get_by_role("link", name=f"Open the conversation with {friendly}").click()
    expect(page.get_by_role("heading", name=friendly, exact=True).first).to_be_visible()
    side = page.get_by_role("complementary", name="About the visitor")
    expect(side.get_by_role("link", name="https://acme.example/shipping")).to_be_visible()
    expect(side).to_contain_text("Firefox 133 on Linux")
    page.evaluate("window.stillHere = true")
    labels = page.get_by_role("form", name="Labels of this conversation")
    labels.get_by_label("Shipping").check()
    labels.get_by_role("button", name="Save labels").click()
    expect(page.get_by_role("form", name="Labels of this conversation").get_by_role("status")).to_have_text(
        "Labels saved.")
    assert page.evaluate("window.stillHere") is True
    assert [lb.name for lb in Conversation.objects.get(pk=norway.pk).labels.all()] == ["Shipping"]
    shoot(page, "inbox-side-panel")

    page.get_by_role("link", name="← Inbox").click()
    page.get_by_role("search", name="Search conversations").get_by_label("Label").select_option(label="Shipping")
    page.get_by_role("search", name="Search conversations").get_by_role("button", name="Search").click()
    expect(page.locator("#inbox-rows tbody tr")).to_have_count(1)
    expect(page.locator(f"tr[data-conversation='{norway.pk}']")).to_contain_text("Shipping")

    # Two ticked, one label for both; the list stays as ticked while it refreshes.
    page.get_by_role("link", name="Clear").click()
    page.get_by_label("Tick the conversation with Ann Lee").check()
    page.get_by_label("Tick the conversation with bo@example.test").check()
    # The list would refresh every second; ticked, it waits. The nav's count still polls
    # (every 3 s): by its next answer the list would have refreshed at least twice.
    refreshed = []
    page.on("request", lambda r: refreshed.append(r.url) if "/inbox/rows/" in r.url else None)
    with page.expect_response(lambda r: "/inbox/count/" in r.url, timeout=10_000):
        pass
    assert refreshed == []
    expect(page.get_by_label("Tick the conversation with Ann Lee")).to_be_checked()
    bulk = page.get_by_role("form", name="With the ticked conversations")
    bulk.get_by_label("Label to add").select_option(label="Refund")
    shoot(page, "inbox-bulk")
    bulk.get_by_role("button", name="Add label").click()
    expect(page.get_by_role("status").first).to_contain_text("Labelled 2 conversations.")
    expect(page.locator(f"tr[data-conversation='{boots.pk}'] .label")).to_have_text("Refund")
    assert {c.pk for c in Conversation.objects.filter(labels__name="Refund")} == {tent.pk, boots.pk}

    # The labels page: how many conversations carry each; a new one added by its form.
    page.get_by_role("link", name="Labels", exact=True).click()
    add = page.get_by_role("form", name="Add a label")
    add.get_by_label("Name").fill("Warranty")
    add.get_by_label("Colour").select_option("green")
    add.get_by_role("button", name="Add label").click()
    expect(page.locator("tr", has_text="Warranty").locator(".label-green")).to_be_visible()
    expect(page.locator("tr", has_text="Refund").locator("td.num")).to_have_text("2")
    shoot(page, "inbox-labels")
    page.context.close()
