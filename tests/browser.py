"""The system Chromium for the browser tests, driven by Playwright (its own browser
download does not work offline): one launch per test module."""

from __future__ import annotations

import os
import shutil

import pytest

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
