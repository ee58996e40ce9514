"""Invitations in a real browser (Chromium driven by Playwright) on Django's test server:
an owner invites, a new person accepts through the link by choosing a password, an
existing person accepts from their own console. Screenshots go to
TANDEM_CONSOLE_SCREENSHOTS when it names a folder (docs/console for the docs)."""

from __future__ import annotations

import pytest

from tenants.models import Membership
from tests.browser import new_page, sign_in
from tests.console.conftest import PASSWORD, user
from tests.factories import make_tenant

pytestmark = pytest.mark.django_db(transaction=True)


def test_an_owner_invites_a_new_and_an_existing_person_and_each_joins_only_by_accepting(live_server, browser, shoot):
    from playwright.sync_api import expect

    acme = make_tenant(slug="acme").tenant
    acme.name = "Acme Outdoor"
    acme.save(update_fields=["name"])
    owner, existing = user(username="olivia"), user(username="sam", email="sam@acme.example")
    Membership.objects.create(user=owner, tenant=acme, role="owner")

    owner_page, joining_page, existing_page = pages = [new_page(browser) for _ in range(3)]

    sign_in(owner_page, live_server.url, "olivia")
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

    joining_page.goto(link)
    expect(joining_page.get_by_role("heading", name="Join Acme Outdoor")).to_be_visible()
    shoot(joining_page, "invitation-link")
    joining_page.get_by_label("Username").fill("nora")
    joining_page.get_by_label("Password", exact=True).fill(PASSWORD)
    joining_page.get_by_label("Password again").fill(PASSWORD)
    joining_page.get_by_role("button", name="Create account and accept").click()
    expect(joining_page.get_by_role("status")).to_contain_text("You are now agent of Acme Outdoor")
    assert Membership.objects.get(tenant=acme, user__username="nora").role == "agent"

    sign_in(existing_page, live_server.url, "sam")
    existing_page.goto(f"{live_server.url}/console/")
    existing_page.get_by_role("link", name="See your invitations").click()
    shoot(existing_page, "invitations")
    existing_page.get_by_role("button", name="Accept the invitation to Acme Outdoor").click()
    expect(existing_page.get_by_role("heading", name="Acme Outdoor")).to_be_visible()
    assert Membership.objects.get(tenant=acme, user=existing).role == "viewer"
    for page in pages:
        page.context.close()
