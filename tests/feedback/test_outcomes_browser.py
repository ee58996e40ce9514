"""The Outcomes page in Chromium, as a tenant's owner sees it after two weeks of
conversations of every kind (built in the database, rolled up as the CPU workers do):
the figures, a bar per day named for screen readers, and the screenshot in
docs/console.md (docs/console/outcomes.png)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from django.utils import timezone

from tandem.chat.models import Conversation
from tandem.feedback.models import Csat, Feedback
from tandem.feedback.rollup import outcomes_rollup
from tenants.models import Membership
from tests.browser import sign_in
from tests.console.conftest import user
from tests.factories import make_tenant
from tests.feedback.test_outcomes import build, reply_of

pytestmark = pytest.mark.django_db(transaction=True)
OUT = Path(__file__).resolve().parents[2] / "docs" / "console"


def two_weeks(tenant) -> None:
    now = timezone.now()
    for days_ago in range(14):
        kinds = ["ai"] * (3 + days_ago % 4) + ["down", "handed", "resolved", "abandoned"][: 1 + days_ago % 4]
        for i, kind in enumerate(kinds):
            if kind == "handed":
                c = build(tenant, "user", "reply", "user", handoff="pending_human", handoff_reason="words",
                          handoff_at=now)
            elif kind == "resolved":
                c = build(tenant, "user", "reply", "user", "agent", handoff="resolved", handoff_reason="button",
                          handoff_at=now, first_human_reply_at=now + dt.timedelta(minutes=3), resolved_at=now)
                Csat.objects.create(tenant=tenant, conversation=c, score=4, answered_by="human", rater="v")
            elif kind == "abandoned":
                c = build(tenant, "user")
            else:
                c = build(tenant, "user", "reply")
                rating = "down" if kind == "down" else "up" if i % 2 else None
                if rating:
                    Feedback.objects.create(tenant=tenant, conversation=c, message=reply_of(c), rater="v", rating=rating)
                if kind == "ai" and i == 0:
                    Csat.objects.create(tenant=tenant, conversation=c, score=5 - days_ago % 2, answered_by="ai", rater="v")
            Conversation.objects.filter(pk=c.pk).update(created_at=now - dt.timedelta(days=days_ago, hours=1))


def test_an_owner_reads_the_outcomes_of_the_last_two_weeks(platform, browser):
    from playwright.sync_api import expect

    created = make_tenant(slug="fjordline")
    owner = user(first_name="Ingrid")
    Membership.objects.create(user=owner, tenant=created.tenant, role=Membership.Role.OWNER)
    two_weeks(created.tenant)
    outcomes_rollup(now=timezone.now() + dt.timedelta(hours=25))
    ctx = browser.new_context(viewport={"width": 1280, "height": 1100}, device_scale_factor=1)
    try:
        page = ctx.new_page()
        sign_in(page, platform.base_url, owner.username)
        page.goto(f"{platform.base_url}/console/t/fjordline/")
        page.get_by_role("link", name="Outcomes").click()
        expect(page.get_by_role("heading", name="Outcomes")).to_be_visible()
        expect(page.get_by_role("link", name="Outcomes")).to_have_attribute("aria-current", "page")
        total = Conversation.objects.filter(tenant=created.tenant).count()
        tiles = page.locator(".tile")
        expect(tiles.filter(has_text="Conversations").locator(".value")).to_have_text(str(total))
        expect(tiles.filter(has_text="CSAT, people").locator(".value")).to_have_text("4.0")
        bars = page.get_by_role("img", name="conversations:", exact=False)
        expect(bars).to_have_count(14)
        page.get_by_label("Range", exact=True).select_option("7")
        page.get_by_label("Per", exact=True).select_option("week")
        page.get_by_role("button", name="Show").click()
        expect(page.get_by_role("heading", name="Per week")).to_be_visible()
        page.get_by_label("Range", exact=True).select_option("30")
        page.get_by_label("Per", exact=True).select_option("day")
        page.get_by_role("button", name="Show").click()
        expect(page.get_by_role("heading", name="Per day")).to_be_visible()
        OUT.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=OUT / "outcomes.png", full_page=False)
    finally:
        ctx.close()
