"""The demo chat page in a real browser (Debian's Chromium driven by Playwright)."""

from __future__ import annotations

import os
import shutil

import pytest

from tests.factories import make_tenant

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(scope="module")
def orm_beside_playwright():
    # Playwright's sync API keeps an event loop running in this thread while the browser
    # is open, which makes Django refuse ORM calls (the tests' and the database
    # fixtures') as "async"; they are plain synchronous code.
    before = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    yield
    if before is None:
        del os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"]
    else:
        os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = before
CHROMIUM = os.environ.get("TANDEM_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.fixture(scope="module")
def browser(orm_beside_playwright):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


def test_a_visitor_chats_on_the_demo_page_and_sees_the_streamed_reply(platform, browser):
    from playwright.sync_api import expect

    tenant = make_tenant(origins=[platform.base_url], max_output_tokens=12)
    page = browser.new_page()
    page.goto(f"{platform.base_url}/demo/{tenant.tenant.slug}/")
    expect(page.locator("#conn")).to_have_text("connected", timeout=20_000)
    page.fill("#text", "Hello, do you have a returns policy?")
    page.click("#send")
    expect(page.locator(".msg.user span")).to_have_text("Hello, do you have a returns policy?")
    expect(page.locator("#conn")).to_contain_text("done", timeout=120_000)
    reply = page.locator(".msg.assistant span").inner_text()
    assert reply.strip()
    from tandem.chat.models import Message

    assert Message.objects.get(role="assistant", conversation__tenant=tenant.tenant).content.strip() == reply.strip()
    page.close()


def test_the_demo_page_of_an_unknown_tenant_is_404(platform, browser):
    page = browser.new_page()
    response = page.goto(f"{platform.base_url}/demo/no-such-tenant/")
    assert response.status == 404
    page.close()
