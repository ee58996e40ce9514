"""The assistant's draft, "Try the assistant" and the evaluation pages in Chromium, on
the running platform with the real model and the demo help centre: an owner drafts a
system prompt, tries it in the chat (the reply cites a help-centre article), adds a test
case to the demo starter set, runs the cases with the live settings and the draft
(progress polled until the runs end on the CPU tier) and compares the two runs. The
screenshots are docs/console/assistant-*.png and evals-*.png (docs/evals.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tandem.evals.models import EvalRun
from tandem.evals.services import STARTER, cases_load
from tenants.models import Membership, UsageRecord
from tests.browser import sign_in
from tests.console.conftest import user
from tests.factories import make_tenant
from tests.knowledge.conftest import import_help_centre

pytestmark = pytest.mark.django_db(transaction=True)
OUT = Path(__file__).resolve().parents[2] / "docs" / "console"
RUN_TIMEOUT_MS = 90_000


def test_an_owner_drafts_tries_evaluates_and_compares(platform, browser):
    from playwright.sync_api import expect

    created = make_tenant(slug="demo-co", max_output_tokens=12)
    tenant = created.tenant
    import_help_centre(tenant)
    cases_load(tenant=tenant, cases=json.loads(STARTER.read_text())[:1])
    owner = user(first_name="Ada")
    Membership.objects.create(user=owner, tenant=tenant, role=Membership.Role.OWNER)
    ctx = browser.new_context(viewport={"width": 1280, "height": 1000}, device_scale_factor=1)
    try:
        page = ctx.new_page()
        sign_in(page, platform.base_url, owner.username)

        # The draft: started from the Assistant page, saved beside the live settings.
        page.goto(f"{platform.base_url}/console/t/demo-co/assistant/")
        page.get_by_role("link", name="Start a draft").click()
        expect(page.get_by_role("heading", name="Draft of the assistant's settings")).to_be_visible()
        page.get_by_label("System prompt").fill("You are Demo Co's support assistant. Answer in one or two "
                                                "sentences, from the help centre's articles.")
        page.get_by_label("Minimum score").fill("0.1")
        page.get_by_role("button", name="Save draft").click()
        expect(page.get_by_text("Draft saved.")).to_be_visible()
        expect(page.locator("#draft-state dt")).to_have_text(["System prompt", "Minimum score"])
        page.screenshot(path=str(OUT / "assistant-draft.png"), full_page=True)

        # Try it: the reply comes through the pipeline and lists what it cited.
        page.get_by_role("link", name="Try the assistant").click()
        expect(page.get_by_role("radio", name="Draft")).to_be_checked()
        page.get_by_label("Message").fill("How long does a refund take?")
        page.get_by_role("button", name="Send").click()
        reply = page.locator(".msg.assistant").last
        expect(reply).to_have_attribute("data-status", "done", timeout=30_000)
        expect(reply.locator(".sources li").first).to_be_visible()
        expect(reply.locator(".sources")).to_contain_text("When will I get my refund?")
        assert UsageRecord.objects.filter(tenant=tenant).count() == 1  # metered as any reply
        page.screenshot(path=str(OUT / "assistant-try.png"), full_page=True)

        # A case of one's own beside the starter set.
        page.get_by_role("link", name="Evaluations").click()
        page.get_by_role("link", name="Add a test case").click()
        page.get_by_label("Question").fill("Can I pay with a gift card?")
        page.get_by_label("Must not include").fill("we do not accept gift cards")
        page.get_by_label("Hand-over").select_option(label="Should not hand over")
        page.get_by_role("button", name="Add test case").click()
        expect(page.get_by_text("Test case added.")).to_be_visible()
        expect(page.locator("tr[id^=case-]")).to_have_count(2)

        # A run with each, carried out by the CPU tier while the page polls.
        for settings in ("live", "draft"):
            page.goto(f"{platform.base_url}/console/t/demo-co/assistant/evals/")
            page.get_by_role("button", name="Run with live settings" if settings == "live"
                             else "Run with the draft").click()
            expect(page.get_by_role("heading", name=f"{settings} settings")).to_be_visible()
            expect(page.locator("#run-body .badge").first).to_have_text("done", timeout=RUN_TIMEOUT_MS)
            expect(page.locator("table.results tbody tr")).to_have_count(2)
            expect(page.get_by_text("cases passed")).to_be_visible()
        runs = list(EvalRun.objects.filter(tenant=tenant).order_by("pk"))
        assert [r.settings for r in runs] == ["live", "draft"] and all(r.summary["cases"] == 2 for r in runs)
        assert UsageRecord.objects.filter(tenant=tenant).count() == 1 + 4
        page.screenshot(path=str(OUT / "evals-run.png"), full_page=True)

        page.goto(f"{platform.base_url}/console/t/demo-co/assistant/evals/")
        page.get_by_label("Compare run").select_option(str(runs[0].pk))
        page.get_by_label("with run").select_option(str(runs[1].pk))
        page.get_by_role("button", name="Compare").click()
        expect(page.get_by_role("heading", name=f"Run {runs[0].pk} and run {runs[1].pk}, side by side")).to_be_visible()
        expect(page.locator("table.compare-cases tbody tr")).to_have_count(2)
        passed = page.locator("table.compare-totals tr", has_text="Cases passed")
        expect(passed).to_contain_text(f"{runs[0].summary['passed']}/2")
        expect(passed).to_contain_text(f"{runs[1].summary['passed']}/2")
        page.screenshot(path=str(OUT / "evals-compare.png"), full_page=True)
        page.goto(f"{platform.base_url}/console/t/demo-co/assistant/evals/")
        page.screenshot(path=str(OUT / "evals.png"), full_page=True)
    finally:
        ctx.close()
