"""The widget's 👍/👎 and CSAT form in Chromium, on the demo page against the running
platform: a visitor rates a real reply with buttons named for screen readers, adds a
comment, and after an agent resolves the conversation answers "How did we do?". What is
stored is asserted; the screenshots (docs/widget/feedback-*.png) are what docs/widget.md
shows."""

from __future__ import annotations

from pathlib import Path

import pytest

from tandem.chat.models import Conversation
from tandem.feedback.models import Csat, Feedback
from tandem.handoff import states
from tenants.models import Membership
from tests.factories import UserFactory, make_tenant

pytestmark = pytest.mark.django_db(transaction=True)
OUT = Path(__file__).resolve().parents[2] / "docs" / "widget"


def test_a_visitor_rates_a_reply_with_named_buttons_and_scores_the_conversation_after_resolve(platform, browser):
    from playwright.sync_api import expect

    created = make_tenant(origins=[platform.base_url], max_output_tokens=16)
    tenant = created.tenant
    tenant.widget_title, tenant.widget_color = "Fjordline help", "#1f4d3a"
    tenant.save()
    ctx = browser.new_context(viewport={"width": 1280, "height": 800}, device_scale_factor=1, reduced_motion="reduce")
    try:
        page = ctx.new_page()
        page.goto(f"{platform.base_url}/demo/{tenant.slug}/")
        page.get_by_role("button", name="Open chat").click()
        page.get_by_role("textbox", name="Message").fill("Do you ship to Iceland?")
        page.keyboard.press("Enter")
        helpful = page.get_by_role("button", name="Helpful", exact=True)
        expect(helpful).to_be_visible(timeout=120_000)
        expect(helpful).to_have_attribute("aria-pressed", "false")
        expect(page.get_by_role("group", name="Rate this reply")).to_have_count(1)  # not on the greeting

        page.get_by_role("button", name="Not helpful").click()
        comment = page.get_by_role("textbox", name="Tell us more (optional)")
        expect(comment).to_be_visible()
        expect(page.get_by_role("button", name="Not helpful")).to_have_attribute("aria-pressed", "true")
        conv = Conversation.objects.get(tenant=tenant)
        reply = conv.messages.get(role="assistant")
        assert list(Feedback.objects.values_list("message_id", "rating")) == [(reply.pk, "down")]
        comment.fill("I asked about Iceland.")
        page.screenshot(path=OUT / "feedback-rated.png")
        comment.press("Enter")
        expect(page.get_by_role("group", name="Rate this reply")).to_contain_text("Thanks for your feedback.")
        row = Feedback.objects.get()
        assert (row.rating, row.comment) == ("down", "I asked about Iceland.")

        # An agent takes the conversation over and resolves it: the widget asks how we did.
        agent = UserFactory(first_name="Maya")
        Membership.objects.create(user=agent, tenant=tenant, role=Membership.Role.AGENT)
        states.conversation_claim(conversation=conv, agent=agent)
        expect(page.locator("tandem-chat .notice")).to_have_text("Maya joined the conversation.")
        assert states.conversation_resolve(conversation=conv)
        legend = page.get_by_role("group", name="How did we do?")
        expect(legend).to_be_visible(timeout=30_000)
        page.get_by_role("radio", name="4 out of 5").check()
        page.get_by_role("textbox", name="Anything to add? (optional)").fill("Fast, thanks.")
        page.screenshot(path=OUT / "feedback-csat.png")
        page.locator("tandem-chat .csat").get_by_role("button", name="Submit rating").click()
        expect(page.locator("tandem-chat .csat")).to_have_text("Thank you for rating this conversation.")
        csat = Csat.objects.get()
        assert (csat.conversation_id, csat.score, csat.comment) == (conv.pk, 4, "Fast, thanks.")

        # A reload does not ask again: this browser has scored the conversation.
        page.reload()  # the panel stays open across a reload (sessionStorage)
        expect(page.get_by_role("button", name="Helpful", exact=True)).to_be_visible()
        expect(page.get_by_role("group", name="How did we do?")).to_have_count(0)
    finally:
        ctx.close()
