"""The screenshots in docs/widget.md, taken on the demo page (a fictional company's site)
with a real conversation: open and closed, desktop and a 375 px phone. A tool, not a
test: `make test` does not collect it (its name is not test_*.py); run it by name,
`.venv/bin/python -m pytest tests/ui/screenshots.py`. What the pictures show is still
asserted, so a broken widget fails rather than being pictured."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.factories import make_tenant

pytestmark = pytest.mark.django_db(transaction=True)
OUT = Path(__file__).resolve().parents[2] / "docs" / "widget"


def test_screenshots_of_the_widget_open_and_closed_on_desktop_and_mobile(platform, browser):
    from playwright.sync_api import expect

    created = make_tenant(origins=[platform.base_url], max_output_tokens=40)
    tenant = created.tenant
    tenant.name, tenant.widget_title = "Fjordline Outfitters", "Fjordline help"
    tenant.widget_color, tenant.widget_greeting = "#1f4d3a", "Hi! Ask us about sizes, delivery, returns or repairs."
    tenant.save()
    OUT.mkdir(parents=True, exist_ok=True)
    url = f"{platform.base_url}/demo/{tenant.slug}/"
    for name, viewport in [("desktop", {"width": 1280, "height": 800}), ("mobile", {"width": 375, "height": 740})]:
        ctx = browser.new_context(viewport=viewport, device_scale_factor=1, reduced_motion="reduce")
        page = ctx.new_page()
        page.goto(url)
        launcher = page.get_by_role("button", name="Open chat")
        expect(launcher).to_be_visible()
        page.screenshot(path=OUT / f"{name}-closed.png")
        launcher.click()
        question = {"desktop": "How do I return a jacket that doesn't fit?", "mobile": "Do you ship to Iceland?"}[name]
        page.get_by_role("textbox", name="Message").fill(question)
        page.keyboard.press("Enter")
        stop = page.get_by_role("button", name="Stop")
        expect(stop).to_be_visible()
        expect(stop).to_be_hidden(timeout=120_000)
        expect(page.locator("tandem-chat .msg.assistant")).to_have_count(2)
        if name == "mobile":
            box = page.get_by_role("dialog").bounding_box()
            assert (round(box["width"]), round(box["height"])) == (375, 740)  # full screen
        page.screenshot(path=OUT / f"{name}-open.png")
        ctx.close()
