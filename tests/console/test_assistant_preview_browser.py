"""The Assistant page's live preview in a real browser (Chromium driven by Playwright) on
Django's test server: the real widget in an iframe redraws with the unsaved values as the
owner types, and its reloads never take the keyboard from the field being typed in (the
preview opens the widget's panel, which must not focus itself when nobody clicked it)."""

from __future__ import annotations

import pytest

from tenants.models import Membership
from tests.browser import signed_in
from tests.console.conftest import user
from tests.factories import make_tenant

pytestmark = pytest.mark.django_db(transaction=True)


def test_typing_a_greeting_redraws_the_preview_and_the_typing_stays_in_the_field(live_server, browser):
    from playwright.sync_api import expect

    acme = make_tenant(slug="acme").tenant
    Membership.objects.create(user=user(username="olivia"), tenant=acme, role="owner")

    page = signed_in(browser, live_server.url, "olivia")
    page.goto(f"{live_server.url}/console/t/acme/assistant/")
    preview = page.frame_locator("#widget-preview")
    # The first preview is drawn (its panel open, the sample exchange shown) before typing.
    expect(preview.get_by_text("How long does delivery take?")).to_be_visible()
    # In the browser's language, with its own strings (not their keys).
    expect(preview.get_by_role("button", name="Send", exact=True)).to_be_visible()
    expect(preview.get_by_placeholder("Type your message…")).to_be_visible()

    greeting = page.get_by_label("Greeting")
    greeting.click()
    greeting.press_sequentially("Welcome to Acme")
    # The preview reloads with the unsaved greeting once the typing pauses.
    expect(preview.get_by_text("Welcome to Acme")).to_be_visible()
    expect(preview.get_by_text("How long does delivery take?")).to_be_visible()
    # The reloaded widget opened its panel without taking the focus: typing goes on in the field.
    expect(greeting).to_be_focused()
    page.keyboard.type(", outdoor friends")
    expect(greeting).to_have_value("Welcome to Acme, outdoor friends")
    expect(preview.get_by_text("Welcome to Acme, outdoor friends")).to_be_visible()
    expect(greeting).to_be_focused()
    page.context.close()
