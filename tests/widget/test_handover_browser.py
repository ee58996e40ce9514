"""The visitor's side of a hand-over in a real browser (Chromium) against the running
platform: out of business hours the offline form at once, with when the team is back,
and an assistant that keeps answering; the widget in French and German; and a hand-over
asked for in words that shows "waiting" (someone online) or the offline form (nobody)
again after every one of 20 reloads of one page."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tandem.chat.models import AgentPresence, Conversation
from tandem.hours import services as hours
from tenants.audit import Actor
from tenants.models import Membership
from tests.factories import UserFactory, make_tenant
from tests.ui.conftest import context, embed_page, host_site, wait_for_event  # noqa: F401 (fixtures)

pytestmark = pytest.mark.django_db(transaction=True)
DOCS = Path(__file__).resolve().parents[2] / "docs" / "widget"
SHOTS = os.environ.get("TANDEM_SCREENSHOTS") == "1"  # docs/widget, refreshed on purpose only


def shot(page, name: str) -> None:
    page.screenshot(path=(DOCS if SHOTS else Path("/tmp")) / name)


def with_agent(tenant, *, online: bool):
    agent = UserFactory(first_name="Maya")
    Membership.objects.create(user=agent, tenant=tenant, role=Membership.Role.AGENT)
    presence(tenant, agent, online=online)
    return agent


def presence(tenant, agent, *, online: bool):
    AgentPresence.objects.update_or_create(tenant=tenant, user=agent, defaults={
        "status": "online" if online else "away", "seen_at": datetime.now(UTC)})


def closed_now(tenant) -> None:
    """Business hours that are closed now: one hour, three days from today."""
    day = (datetime.now(UTC).weekday() + 3) % 7
    hours.hours_save(tenant=tenant, actor=Actor(), enabled=True, time_zone="UTC",
                     weekly={str(day): ["10:00", "11:00"]}, holidays="")


def test_out_of_hours_the_widget_offers_the_form_at_once_says_when_the_team_is_back_and_keeps_answering(
        platform, context, host_site):  # noqa: F811
    from playwright.sync_api import expect

    site = make_tenant(origins=[host_site.origin], max_output_tokens=8)
    tenant = site.tenant
    with_agent(tenant, online=True)  # online, but out of hours nobody takes conversations
    closed_now(tenant)
    page = context.new_page()
    page.goto(host_site.page("/closed", embed_page(platform, site.widget_key.plaintext)))
    page.get_by_role("button", name="Open chat").click()
    page.get_by_role("button", name="Talk to a person", exact=True).click()

    form = page.locator("tandem-chat form.offline")
    expect(form).to_contain_text("Leave your e-mail and a message: we will answer by e-mail.")
    back = datetime.fromisoformat(hours_back_at(tenant))
    notice = page.locator("tandem-chat .notice")
    expect(notice).to_contain_text(f"Our team is away. We are back on {back.strftime('%A')}")
    expect(page.locator("tandem-chat")).not_to_contain_text("Waiting for a person")
    expect(page.get_by_role("button", name="Talk to a person", exact=True)).to_be_hidden()
    # Labelled boxes and a primary button; a calm notice, not the error red.
    expect(form.get_by_label("Your e-mail")).to_be_visible()
    expect(form.get_by_label("Your question for the team")).to_be_visible()
    send = form.get_by_role("button", name="Send to the team")
    assert send.evaluate("b => getComputedStyle(b).backgroundColor") == "rgb(47, 91, 211)"  # the tenant's colour
    assert notice.evaluate("n => getComputedStyle(n).backgroundColor") == "rgb(238, 243, 251)"
    expect(page.locator("tandem-chat .alert")).to_be_hidden()  # the error alert is empty
    shot(page, "handover-closed.png")

    # The assistant keeps answering while the conversation waits for the morning.
    page.get_by_role("textbox", name="Message", exact=True).fill("Do you ship to Iceland?")
    page.keyboard.press("Enter")
    reply = wait_for_event(page, "message", role="assistant")[0]
    assert reply["text"].strip()
    assert Conversation.objects.get(tenant=tenant).handoff == "pending_human"
    expect(form).to_be_visible()  # still at the end of the conversation
    assert page.locator("tandem-chat .log > *").last.evaluate("el => el.classList.contains('offline')")


def hours_back_at(tenant) -> str:
    from tandem.handoff.assignment import unreachable

    return unreachable(tenant_id=tenant.pk)["back_at"]


def test_the_widget_speaks_french_and_german_and_its_menu_follows_the_arrow_keys(platform, browser, host_site):  # noqa: F811
    from playwright.sync_api import expect

    site = make_tenant(origins=[host_site.origin])
    with_agent(site.tenant, online=False)
    key = site.widget_key.plaintext
    ctx = browser.new_context(locale="fr-FR", viewport={"width": 1280, "height": 800})
    try:
        page = ctx.new_page()
        sockets = []
        page.on("websocket", lambda ws: sockets.append(ws.url))
        page.goto(host_site.page("/fr", embed_page(platform, key)))
        page.get_by_role("button", name="Ouvrir le chat").click()
        expect(page.get_by_role("textbox", name="Message", exact=True)).to_be_focused()
        page.get_by_role("button", name="Plus d'options").click()
        first = page.get_by_role("menuitem", name="Nouvelle conversation")
        expect(first).to_be_focused()
        page.keyboard.press("ArrowDown")
        expect(page.get_by_role("menuitem", name="Parler à une personne")).to_be_focused()
        page.keyboard.press("ArrowDown")  # wraps around
        expect(first).to_be_focused()
        page.keyboard.press("End")
        page.keyboard.press("Enter")
        form = page.locator("tandem-chat form.offline")
        expect(form).to_contain_text("Personne n'est en ligne.")
        expect(form.get_by_label("Votre e-mail")).to_be_visible()
        expect(form.get_by_label("Votre question pour l'équipe")).to_be_visible()
        expect(form.get_by_role("button", name="Envoyer à l'équipe")).to_be_visible()
        assert any("locale=fr" in url for url in sockets), sockets  # the assistant answers in French
        shot(page, "widget-fr.png")
    finally:
        ctx.close()
    ctx = browser.new_context(locale="de-DE")
    try:
        page = ctx.new_page()
        page.goto(host_site.page("/de", embed_page(platform, key)))
        page.get_by_role("button", name="Chat öffnen").click()
        expect(page.get_by_role("button", name="Mit einer Person sprechen")).to_be_visible()
        expect(page.get_by_role("button", name="Senden")).to_be_visible()
        expect(page.locator("tandem-chat .msg.assistant")).to_have_text("Hallo! Wie können wir Ihnen helfen?")
    finally:
        ctx.close()


def test_a_hand_over_in_words_shows_waiting_or_the_form_again_after_each_of_20_reloads(
        platform, context, host_site):  # noqa: F811
    from playwright.sync_api import expect

    site = make_tenant(origins=[host_site.origin])
    tenant = site.tenant
    agent = with_agent(tenant, online=True)
    page = context.new_page()
    page.goto(host_site.page("/words", embed_page(platform, site.widget_key.plaintext)))
    page.get_by_role("button", name="Open chat").click()
    notice, form = page.locator("tandem-chat .notice"), page.locator("tandem-chat form.offline")
    replies = page.locator("tandem-chat .msg.assistant")
    for i in range(20):
        online = i % 2 == 0
        presence(tenant, agent, online=online)
        if i:
            page.get_by_role("button", name="More options").click()
            page.get_by_role("menuitem", name="New conversation").click()
        page.get_by_role("textbox", name="Message", exact=True).fill("Can I talk to a human please?")
        page.keyboard.press("Enter")
        for when in ("sent", "reloaded"):
            if online:
                expect(notice).to_have_text("Waiting for a person from the team…", timeout=15_000)
                expect(form).to_have_count(0)
                expect(replies.last).to_contain_text("Someone will reply here shortly.")
            else:
                expect(form).to_be_visible(timeout=15_000)
                expect(notice).to_have_text("")
                # The assistant's own words promise nobody either.
                expect(replies.last).to_contain_text("Nobody from our team is available right now.")
            if when == "sent":
                page.reload()  # the panel stays open across a reload (sessionStorage)
    assert Conversation.objects.filter(tenant=tenant, handoff="pending_human").count() == 20
