"""Invitations in a real browser (Chromium driven by Playwright) on Django's test server:
an owner invites, a new person accepts through the link by choosing a password, an
existing person accepts from their own console. Screenshots go to
TANDEM_CONSOLE_SCREENSHOTS when it names a folder (docs/console for the docs)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tenants.models import Membership
from tests.console.conftest import PASSWORD, user
from tests.console.test_browser import sign_in
from tests.factories import make_tenant

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def shoot(tmp_path):
    out = Path(os.environ.get("TANDEM_CONSOLE_SCREENSHOTS") or tmp_path)
    out.mkdir(parents=True, exist_ok=True)

    def take(page, name: str) -> None:
        path = out / f"{name}.png"
        page.screenshot(path=str(path), full_page=True)
        assert path.stat().st_size > 10_000

    return take


def test_an_owner_invites_a_new_and_an_existing_person_and_each_joins_only_by_accepting(live_server, browser, shoot):
    from playwright.sync_api import expect

    acme = make_tenant(slug="acme").tenant
    acme.name = "Acme Outdoor"
    acme.save(update_fields=["name"])
    owner, existing = user(username="olivia"), user(username="sam", email="sam@acme.example")
    Membership.objects.create(user=owner, tenant=acme, role="owner")

    class Site:
        base_url = live_server.url

    contexts = [browser.new_context(viewport={"width": 1280, "height": 900}) for _ in range(3)]
    for c in contexts:
        c.set_default_timeout(20_000)
    owner_page, new_page, existing_page = (c.new_page() for c in contexts)

    sign_in(owner_page, Site, "olivia")
    owner_page.goto(f"{live_server.url}/console/t/acme/members/")
    form = owner_page.get_by_role("form", name="Invite a person")
    form.get_by_label("Username or e-mail").fill("newcomer@acme.example")
    form.get_by_label("Role").select_option("agent")
    form.get_by_role("button", name="Invite").click()
    link = owner_page.locator("#invitation-link").inner_text()
    assert "/console/invite/" in link
    form = owner_page.get_by_role("form", name="Invite a person")
    form.get_by_label("Username or e-mail").fill("sam")
    form.get_by_role("button", name="Invite").click()
    expect(owner_page.get_by_role("row", name="newcomer@acme.example")).to_be_visible()
    expect(owner_page.get_by_role("button", name="Revoke the invitation of sam")).to_be_visible()
    shoot(owner_page, "members")
    assert not Membership.objects.filter(tenant=acme, user=existing).exists()

    new_page.goto(link)
    expect(new_page.get_by_role("heading", name="Join Acme Outdoor")).to_be_visible()
    shoot(new_page, "invitation-link")
    new_page.get_by_label("Username").fill("nora")
    new_page.get_by_label("Password", exact=True).fill(PASSWORD)
    new_page.get_by_label("Password again").fill(PASSWORD)
    new_page.get_by_role("button", name="Create account and accept").click()
    expect(new_page.get_by_role("status")).to_contain_text("You are now agent of Acme Outdoor")
    assert Membership.objects.get(tenant=acme, user__username="nora").role == "agent"

    sign_in(existing_page, Site, "sam")
    existing_page.goto(f"{live_server.url}/console/")
    existing_page.get_by_role("link", name="See your invitations").click()
    shoot(existing_page, "invitations")
    existing_page.get_by_role("button", name="Accept the invitation to Acme Outdoor").click()
    expect(existing_page.get_by_role("heading", name="Acme Outdoor")).to_be_visible()
    assert Membership.objects.get(tenant=acme, user=existing).role == "viewer"
    for c in contexts:
        c.close()
