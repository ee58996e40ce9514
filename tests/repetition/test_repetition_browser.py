"""Repetition control in a real browser (Chromium driven by Playwright) on Django's test
server: an admin finds it from the assistant page, turns it off and back on with other
penalties, and an out-of-range value is shown on its field. The screenshot goes to
TANDEM_CONSOLE_SCREENSHOTS when it names a folder (docs/console for the docs)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tandem.repetition.models import RepetitionSettings
from tenants.models import Membership
from tests.browser import signed_in
from tests.console.conftest import user
from tests.factories import make_tenant

pytestmark = pytest.mark.django_db(transaction=True)


def test_an_admin_changes_repetition_control_from_the_assistant_page(live_server, browser, tmp_path):
    from playwright.sync_api import expect

    tenant = make_tenant(slug="acme").tenant
    admin = user(username="ada")
    Membership.objects.create(user=admin, tenant=tenant, role="admin")

    page = signed_in(browser, live_server.url, "ada")
    page.goto(f"{live_server.url}/console/t/acme/assistant/")
    page.get_by_role("link", name="Change repetition control").click()
    expect(page.get_by_role("status")).to_contain_text("On: frequency")
    page.get_by_label("Frequency penalty").fill("3")
    page.get_by_role("button", name="Save").click()
    expect(page.locator(".has-error")).to_contain_text("less than or equal to 2")
    page.get_by_label("Frequency penalty").fill("0.6")
    page.get_by_label("Repetition penalty").fill("1.05")
    page.get_by_role("button", name="Save").click()
    expect(page.locator("#repetition-now")).to_contain_text("frequency 0.6")
    row = RepetitionSettings.objects.get(tenant=tenant)
    assert row.enabled and (row.frequency_penalty, row.repetition_penalty) == (0.6, 1.05)
    out = Path(os.environ.get("TANDEM_CONSOLE_SCREENSHOTS") or tmp_path)
    out.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(out / "repetition.png"), full_page=True)
    assert (out / "repetition.png").stat().st_size > 10_000
    page.get_by_role("checkbox", name="Repetition control").uncheck()
    page.get_by_role("button", name="Save").click()
    expect(page.locator("#repetition-now")).to_contain_text("Off")
    assert not RepetitionSettings.objects.get(tenant=tenant).enabled
    page.context.close()
