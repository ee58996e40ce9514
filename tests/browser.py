"""The system Chromium for the browser tests, driven by Playwright (its own browser
download does not work offline): one launch per test module."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.world import PASSWORD

CHROMIUM = os.environ.get("TANDEM_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.fixture(scope="module")
def orm_beside_playwright():
    # Playwright's sync API keeps an event loop running in this thread while the browser
    # is open, which makes Django refuse ORM calls (the tests' and the database
    # fixtures') as "async"; they are plain synchronous code. Per module, not per
    # session: the variable must not reach later tests' subprocesses (`check --deploy`
    # refuses it), and a browser starts in about a second.
    before = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    yield
    if before is None:
        del os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"]
    else:
        os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = before


@pytest.fixture(scope="module")
def browser(orm_beside_playwright):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


@pytest.fixture
def shoot(tmp_path):
    """Takes a page's full screenshot as `name`.png (into TANDEM_CONSOLE_SCREENSHOTS when
    set, for the README's pictures; else the test's own folder) and checks it shows
    something (a blank page's PNG is a few kB)."""
    out = Path(os.environ.get("TANDEM_CONSOLE_SCREENSHOTS") or tmp_path)
    out.mkdir(parents=True, exist_ok=True)

    def take(page, name: str) -> None:
        path = out / f"{name}.png"
        page.screenshot(path=str(path), full_page=True)
        assert path.stat().st_size > 10_000

    return take


def sign_in(page, base_url: str, username: str, password: str = PASSWORD) -> None:
    """Signs `username` in to the console at `base_url` through its sign-in page."""
    from playwright.sync_api import expect

    page.goto(f"{base_url}/console/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("button", name="Sign out")).to_be_visible()


def new_page(browser, *, timeout_ms: int = 20_000, **context_options):
    """A page of a new browser context, 1280×900 unless `context_options` say otherwise;
    `page.context.close()` ends it."""
    context = browser.new_context(**{"viewport": {"width": 1280, "height": 900}, **context_options})
    context.set_default_timeout(timeout_ms)
    return context.new_page()


def signed_in(browser, base_url: str, username: str, **page_options):
    """A `new_page` with `username` signed in to the console at `base_url`."""
    page = new_page(browser, **page_options)
    sign_in(page, base_url, username)
    return page
