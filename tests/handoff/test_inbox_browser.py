"""The agent's workspace in a real browser (Chromium driven by Playwright) on Django's
test server: an agent signs in to the inbox with the waiting count in the nav and the
title, filters it, claims without a reload, writes an internal note that looks like
one, expands a saved reply, keeps typed text when "Suggest a reply" is declined, and resolves on to the next
waiting conversation. Screenshots go to TANDEM_CONSOLE_SCREENSHOTS when it names a
folder (docs/console for the docs)."""

from __future__ import annotations

import pytest

from tandem.chat.models import Conversation, Message
from tandem.saved_replies.services import saved_reply_create
from tenants.models import Membership
from tests.browser import signed_in
from tests.factories import make_tenant
from tests.world import user, waiting

pytestmark = pytest.mark.django_db(transaction=True)
NOTE_BG = "rgb(255, 248, 225)"


def test_an_agent_lands_in_the_inbox_claims_writes_a_private_note_and_resolves_to_the_next(
        live_server, browser, shoot):
    from playwright.sync_api import expect

    acme = make_tenant(slug="acme-inbox").tenant
    acme.name = "Acme Outdoor"
    acme.save(update_fields=["name"])
    maya = user(username="maya", first_name="Maya")
    Membership.objects.create(user=maya, tenant=acme, role=Membership.Role.AGENT)
    ann = waiting(acme, "My tent pole snapped on day one", minutes=11, user_name="Ann Lee")
    other = waiting(acme, "Do you ship to Norway?", minutes=3, visitor_id="9c1e0f3a77b2")

    page = signed_in(browser, live_server.url, maya.username)
    expect(page).to_have_url(f"{live_server.url}/console/t/{acme.slug}/inbox/")
    count = page.locator("#inbox-count")
    expect(count).to_have_text("2")
    expect(page).to_have_title("(2) Inbox · Acme Outdoor · Tandem")
    row = page.locator(f"tr[data-conversation='{ann.pk}']")
    expect(row).to_contain_text("Ann Lee")
    expect(row).to_contain_text("11 min")
    expect(page.locator(f"tr[data-conversation='{other.pk}']")).not_to_contain_text("9c1e0f3a77b2")
    shoot(page, "inbox")

    page.get_by_role("navigation", name="Filter conversations").get_by_role("link", name="Mine").click()
    expect(page.get_by_text("No conversations of yours are open.")).to_be_visible()
    page.get_by_role("navigation", name="Filter conversations").get_by_role("link", name="Waiting").click()
    expect(page).to_have_url(f"{live_server.url}/console/t/{acme.slug}/inbox/?view=waiting")
    expect(page.locator(f"tr[data-conversation='{other.pk}']")).to_be_visible()
    page.get_by_role("link", name="Open the conversation with Ann Lee").click()
    expect(page.get_by_role("heading", name="Ann Lee", level=2)).to_be_visible()

    # Claim swaps the actions panel in place: the page (and this marker in it) stays.
    page.evaluate("window.stillHere = true")
    page.get_by_role("button", name="Claim").click()
    expect(page.locator("#assignee")).to_have_text("you")
    expect(page.locator("#handoff-state")).to_have_text("with a person")
    assert page.evaluate("window.stillHere") is True
    expect(count).to_have_text("1")  # the nav's poll
    expect(page).to_have_title("(1) Ann Lee · Inbox · Acme Outdoor · Tandem")

    # The note switch: another colour, another label, another button; Ctrl+Enter adds it.
    box = page.locator("#reply-text")
    reply_box = page.locator("#reply")
    assert reply_box.evaluate("e => getComputedStyle(e).backgroundColor") != NOTE_BG
    page.get_by_role("radio", name="Internal note").check()
    expect(reply_box).to_have_css("background-color", NOTE_BG)
    expect(page.get_by_role("textbox", name="Internal note: only your team sees this")).to_be_visible()
    expect(page.get_by_role("button", name="Add internal note")).to_be_visible()
    box.fill("Offer a replacement pole")
    shoot(page, "inbox-note")
    box.press("Control+Enter")
    expect(page.locator("#transcript .msg.note")).to_contain_text("Offer a replacement pole")
    expect(box).to_have_value("")
    assert Message.objects.get(conversation=ann, content="Offer a replacement pole").role == Message.Role.NOTE

    # A saved reply: "/" and its shortcut offers it, Tab puts it in, filled in for Ann.
    page.get_by_role("radio", name="Reply").check()
    saved_reply_create(tenant=acme, shortcut="sorry", text="Sorry about that, {{visitor.name}}. {{agent.name}} here.")
    box.press_sequentially("/sor")
    expect(page.get_by_role("list", name="Saved replies")).to_contain_text("/sorry")
    shoot(page, "inbox-saved-reply")
    box.press("Tab")
    expect(box).to_have_value("Sorry about that, Ann Lee. Maya here.")
    expect(page.get_by_role("list", name="Saved replies")).to_be_hidden()

    # "Suggest a reply" asks before replacing what was typed; declining keeps it.
    box.fill("Sorry about the pole, Ann")
    asked = []
    page.once("dialog", lambda d: (asked.append(d.message), d.dismiss()))
    page.get_by_role("button", name="Suggest a reply").click()
    expect(box).to_have_value("Sorry about the pole, Ann")
    assert asked == ["Replace what you typed with a suggested reply?"]
    box.press("Control+Enter")
    expect(page.locator("#transcript .msg.agent")).to_contain_text("Sorry about the pole, Ann")
    assert Message.objects.get(conversation=ann, content="Sorry about the pole, Ann").role == Message.Role.AGENT

    # Resolve goes on to the conversation still waiting.
    page.get_by_role("button", name="Resolve and go to the next").click()
    expect(page).to_have_url(f"{live_server.url}/console/t/{acme.slug}/inbox/{other.pk}/")
    expect(page.get_by_role("status").first).to_contain_text("Resolved")
    expect(page.locator("#transcript")).to_contain_text("Do you ship to Norway?")
    expect(page.get_by_role("button", name="Suggest a reply")).to_be_hidden()  # not hers until she claims it
    shoot(page, "inbox-next")
    assert Conversation.objects.get(pk=ann.pk).handoff == Conversation.Handoff.RESOLVED
    page.context.close()
