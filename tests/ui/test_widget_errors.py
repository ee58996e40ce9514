"""Errors as a visitor reads them, each in an element with role="alert": the network
going away, the tenant's rate limit, no worker to answer."""

from __future__ import annotations

import re

import pytest

from tandem.chat.models import Message
from tandem.db_pool import BUSY_MESSAGE, RETRY_AFTER_S
from tenants.models import ComputePool
from tests.factories import make_tenant
from tests.faults.conftest import until
from tests.ui.conftest import embed_page, events, wait_for_event, wait_for_reply_text
from tests.ui.test_widget_chat import _frames_sent

pytestmark = pytest.mark.django_db(transaction=True)


def test_when_the_connection_drops_the_widget_says_so_reconnects_and_the_reply_continues(
        platform, context, host_site, cuttable):
    from playwright.sync_api import expect

    # Long enough to be still streaming when the connection comes back (a reply that ends
    # while it is down is the next test's).
    tenant = make_tenant(origins=[host_site.origin], max_output_tokens=400)
    page = context.new_page()
    page.goto(host_site.page("/offline", embed_page(platform, tenant.widget_key.plaintext, base=cuttable.base_url)))
    page.get_by_role("button", name="Open chat").click()
    page.get_by_role("textbox", name="Message").fill("Write a long story about a lighthouse keeper and her cat.")
    page.keyboard.press("Enter")
    wait_for_reply_text(page)
    sent = _frames_sent(page)

    cuttable.cut()
    alert = page.get_by_role("alert")
    expect(alert).to_contain_text("Connection lost. Reconnecting in")
    assert not Message.objects.filter(role="assistant", conversation__tenant=tenant.tenant, status="done").exists()
    cuttable.restore()
    reply = wait_for_event(page, "message", role="assistant")[0]
    expect(page.locator("tandem-chat [role=alert]")).to_be_empty()
    stored = Message.objects.get(role="assistant", conversation__tenant=tenant.tenant)
    assert reply["text"] == stored.content  # continued where it stopped: no repeats, no gaps
    resumes = [f for f in sent if f["type"] == "resume"]
    assert len(resumes) == 1 and resumes[0]["message"] == str(stored.pk) and resumes[0]["after"] >= 0


def test_a_reply_that_ends_while_the_connection_is_down_is_announced_when_it_comes_back(
        platform, context, host_site, cuttable):
    """Its `end` frame never reached the page: the transcript the widget asks for on
    reconnecting says it is done, and the widget ends it as it would have on `end`."""
    from playwright.sync_api import expect

    tenant = make_tenant(origins=[host_site.origin], max_output_tokens=80)
    page = context.new_page()
    page.goto(host_site.page("/ended", embed_page(platform, tenant.widget_key.plaintext, base=cuttable.base_url)))
    page.get_by_role("button", name="Open chat").click()
    page.get_by_role("textbox", name="Message").fill("Write a long story about a lighthouse keeper and her cat.")
    page.keyboard.press("Enter")
    wait_for_reply_text(page)
    cuttable.cut()
    expect(page.get_by_role("alert")).to_contain_text("Connection lost. Reconnecting in")
    stored = until(lambda: Message.objects.filter(role="assistant", conversation__tenant=tenant.tenant,
                                                  status="done").first(), timeout=120, what="the reply to end")
    assert not events(page, "message") or all(e["role"] == "user" for e in events(page, "message"))
    cuttable.restore()
    reply = wait_for_event(page, "message", role="assistant")[0]
    assert reply["text"] == stored.content and reply["id"] == str(stored.pk)
    assert reply["finish_reason"] == stored.finish_reason
    expect(page.locator("tandem-chat [aria-live]")).to_contain_text(stored.content.split()[0])


def test_over_the_rate_limit_the_widget_says_when_to_try_again_and_keeps_the_message(platform, context, host_site):
    from playwright.sync_api import expect

    tenant = make_tenant(origins=[host_site.origin], requests_per_minute=1, max_output_tokens=4)
    page = context.new_page()
    page.goto(host_site.page("/rate", embed_page(platform, tenant.widget_key.plaintext)))
    page.get_by_role("button", name="Open chat").click()
    box = page.get_by_role("textbox", name="Message")
    box.fill("Hello")
    page.keyboard.press("Enter")
    wait_for_event(page, "message", role="assistant")
    box.fill("Hello again")
    page.keyboard.press("Enter")
    expect(page.get_by_role("alert")).to_have_text(
        re.compile(r"You are sending messages too quickly\. Please try again in \d+ seconds\."))
    expect(box).to_have_value("Hello again")  # nothing was lost
    expect(page.locator("tandem-chat .msg.user")).to_have_text(["Hello"])
    assert [e["code"] for e in events(page, "error")] == ["rate_limited"]
    assert list(Message.objects.filter(conversation__tenant=tenant.tenant, role="user")
                .values_list("content", flat=True)) == ["Hello"]


def test_with_no_worker_for_the_tenant_the_widget_says_the_assistant_is_busy(platform, context, host_site):
    from playwright.sync_api import expect

    tenant = make_tenant(origins=[host_site.origin])
    allocation = tenant.tenant.allocation
    allocation.prefill_pool = ComputePool.objects.create(slug="nobody-home", role="prefill")
    allocation.save()
    page = context.new_page()
    page.goto(host_site.page("/busy", embed_page(platform, tenant.widget_key.plaintext)))
    page.get_by_role("button", name="Open chat").click()
    page.get_by_role("textbox", name="Message").fill("Anyone there?")
    page.keyboard.press("Enter")
    expect(page.get_by_role("status")).to_have_text("Waiting for the assistant…")
    # The platform under test gives up on a queued request after 8 s (TANDEM_QUEUE_TIMEOUT_S).
    expect(page.get_by_role("alert")).to_have_text("The assistant is busy right now. Please try again in a moment.",
                                                   timeout=30_000)
    expect(page.get_by_role("button", name="Stop")).to_be_hidden()
    expect(page.get_by_role("button", name="Send")).to_be_enabled()
    assert [e["code"] for e in events(page, "error")] == ["no_worker"]


# tandem.db_pool's page answer (PoolExhaustedMiddleware), which carries no CORS headers.
BUSY = {"status": 503, "headers": {"Retry-After": str(RETRY_AFTER_S), "Content-Type": "text/plain; charset=utf-8"},
        "body": BUSY_MESSAGE + "\n"}


def test_a_configuration_answered_busy_is_asked_again_and_the_widget_appears(platform, context, host_site):
    """A burst that finds the web process's database pool full answers 503 (test_web_db_pool);
    the page sees it as a network error (it has no CORS headers). The first configuration
    request is answered so here, in the browser; the next goes to the platform."""
    from playwright.sync_api import expect

    tenant = make_tenant(origins=[host_site.origin])
    asked = []

    def busy_once(route):
        asked.append(route.request.url)
        route.fulfill(**BUSY) if len(asked) == 1 else route.continue_()

    page = context.new_page()
    page.route("**/widget/config?*", busy_once)
    page.goto(host_site.page("/burst", embed_page(platform, tenant.widget_key.plaintext)))
    page.get_by_role("button", name="Open chat").click(timeout=30_000)
    assert len(asked) == 2, asked
    expect(page.get_by_role("textbox", name="Message")).to_be_visible()
    assert wait_for_event(page, "ready")


def test_a_configuration_that_never_comes_is_asked_four_times_and_no_widget_is_shown(platform, context, host_site):
    tenant = make_tenant(origins=[host_site.origin])
    asked = []
    page = context.new_page()
    page.route("**/widget/config?*", lambda route: (asked.append(route.request.url), route.fulfill(**BUSY)))
    # The loader's tries are 1 + 2 + 4 s apart; then the widget gives up, and says so.
    with page.expect_console_message(lambda m: m.type == "warning", timeout=30_000) as warning:
        page.goto(host_site.page("/down", embed_page(platform, tenant.widget_key.plaintext)))
    assert "configuration could not be fetched" in warning.value.text
    assert len(asked) == 4, asked
    assert page.get_by_role("button", name="Open chat").count() == 0
    assert not events(page, "ready")
