"""An owner's first hour in a real browser (Chromium driven by Playwright) on Django's
test server: the getting-started checklist turns green as each step is done, the tabs
come in the order a tenant works with no infrastructure tab, and test retrieval shows
the ranked chunks (the session platform's CPU worker retrieves them). The widget's connect is the real socket consumer, run in this
process (the test server speaks HTTP only). Screenshots go to
TANDEM_CONSOLE_SCREENSHOTS when it names a folder (docs/console for the docs)."""

from __future__ import annotations

import asyncio
import re
import threading

import pytest
from channels.testing import WebsocketCommunicator

from knowledge import services as knowledge
from knowledge.models import Article
from tandem.chat.consumers import ChatConsumer
from tandem.chat.models import Conversation, Message
from tenants import services
from tenants.models import Membership
from tests.browser import signed_in
from tests.console.conftest import user
from tests.console.test_browser import tenant_nav
from tests.knowledge.conftest import import_help_centre

pytestmark = pytest.mark.django_db(transaction=True)
SHOP = "https://shop.acme.example"


def widget_connects(key: str, origin: str) -> str:
    """A visitor's page opening the widget from `origin`: the socket's first answer
    (an error code, or "ok" once the connect ran to its end and a request was served).
    In a thread of its own: Playwright's sync API holds this thread's event loop."""
    result = {}

    async def connect():
        comm = WebsocketCommunicator(ChatConsumer.as_asgi(), f"/ws/chat/?key={key}",
                                     headers=[(b"origin", origin.encode())])
        comm.scope["client"] = ("198.51.100.9", 50000)
        await comm.connect(timeout=20)
        try:
            await comm.send_json_to({"type": "history", "conversation": "x"})
            while (frame := await comm.receive_json_from(timeout=20))["type"] != "error":
                pass
            return "ok" if frame["code"] == "conversation_not_found" else frame["code"]
        finally:
            await comm.disconnect(timeout=20)

    thread = threading.Thread(target=lambda: result.update(code=asyncio.run(connect())))
    thread.start()
    thread.join(timeout=60)
    return result["code"]


def test_the_checklist_turns_green_step_by_step_and_test_retrieval_ranks_chunks(platform, live_server, browser,
                                                                                  shoot):
    from playwright.sync_api import expect

    created = services.tenant_create(slug="acme", name="Acme Outdoor", allowed_origins=[])
    owner = user(username="olivia")
    Membership.objects.create(user=owner, tenant=created.tenant, role="owner")

    page = signed_in(browser, live_server.url, "olivia")
    page.goto(f"{live_server.url}/console/t/acme/")
    checklist = page.get_by_role("region", name="Getting started")

    def step(title: str):
        return checklist.get_by_role("listitem").filter(has_text=title)

    def expect_done(*titles: str) -> None:
        page.goto(f"{live_server.url}/console/t/acme/")
        for title in titles:
            expect(step(title)).to_have_attribute("aria-label", f"{title}: done")
        expect(page.locator("#checklist-progress")).to_have_text(f"{len(titles)} of 5 done")

    expect(page.locator("#checklist-progress")).to_have_text("0 of 5 done")
    # The tabs: what a tenant does, in order, and no infrastructure.
    names = [re.sub(r"\s*\d+$", "", n.strip())  # "Inbox 0": the waiting count beside it
             for n in tenant_nav(page, "Acme Outdoor").get_by_role("link").all_inner_texts()]
    order = ["Overview", "Inbox", "Conversations", "Assistant", "Knowledge", "Team", "Install", "Usage"]
    assert [n for n in names if n in order] == order, names
    assert "Quotas" not in names and "Hardware allocation" not in names
    shoot(page, "checklist-start")

    # 1. Copy the snippet, from the Install page.
    step("Copy the embed snippet").get_by_role("link", name="Install").click()
    expect(page.get_by_role("heading", name="Install", exact=True)).to_be_visible()
    with page.expect_response(lambda r: r.url.endswith("/install/copied/") and r.status == 204):
        page.get_by_role("button", name="Copy the embed snippet").click()
    expect_done("Copy the embed snippet")

    # 2. Allow the site's origin: done once the widget has connected from it.
    step("Allow your site's origin").get_by_role("link", name="Allowed origins").click()
    page.get_by_label("Allowed origins", exact=True).fill(SHOP)
    page.get_by_role("button", name="Save origins").click()
    expect(page.get_by_role("status").filter(has_text="Saved the allowed origins")).to_be_visible()
    shoot(page, "install")
    key = created.widget_key.plaintext
    assert widget_connects(key, "https://evil.example") == "origin_not_allowed"
    expect_done("Copy the embed snippet")
    expect(step("Allow your site's origin")).to_contain_text(f"Allowed: {SHOP}")
    assert widget_connects(key, SHOP) == "ok"
    expect_done("Copy the embed snippet", "Allow your site's origin")
    expect(step("Allow your site's origin")).to_contain_text(f"connected from {SHOP}")

    # 3. Add articles: written in the console, indexed as the CPU worker's task does.
    step("Add articles").get_by_role("link", name="Knowledge").click()
    for title, body in (("Delivery times", "Parcels leave our warehouse within two working days."),
                        ("Returns", "Send an unused item back within 30 days for a full refund."),
                        ("Tent care", "Dry your tent fully before packing it away to stop mould.")):
        page.get_by_role("link", name="New article").click()
        page.get_by_label("Title", exact=True).fill(title)
        page.get_by_label("Body", exact=True).fill(body)
        page.get_by_role("button", name="Save").click()
        expect(page.get_by_role("heading", name="Knowledge", exact=True)).to_be_visible()
    for article in Article.objects.filter(tenant=created.tenant):
        knowledge.article_index(article_id=article.pk)
    expect_done("Copy the embed snippet", "Allow your site's origin", "Add articles")

    # 4. Try the assistant: its first finished reply (stored as the pipeline stores one).
    conv = Conversation.objects.create(tenant=created.tenant, channel="api", visitor_id="trial")
    Message.objects.create(conversation=conv, role="user", content="When does my parcel leave?")
    Message.objects.create(conversation=conv, role="assistant", content="Within two working days.")
    expect_done("Copy the embed snippet", "Allow your site's origin", "Add articles", "Try the assistant")

    # The hand-over phrases on the Assistant page: the built-in set shown, one's own as words.
    step("Try the assistant").get_by_role("link", name="Assistant").click()
    expect(page.get_by_role("listitem").filter(has_text="“talk to a person”")).to_be_visible()
    expect(page.get_by_label("Regular expressions")).not_to_be_visible()  # behind "Advanced"
    page.get_by_label("Hand-over phrases").fill("speak to a manager\nI want a refund now")
    page.get_by_role("button", name="Save", exact=True).click()
    expect(page.get_by_role("status").filter(has_text="Saved")).to_be_visible()
    expect(page.get_by_label("Hand-over phrases")).to_have_value("speak to a manager\nI want a refund now")
    page.get_by_label("Hand-over phrases").scroll_into_view_if_needed()
    shoot(page, "assistant-phrases")
    expect_done("Copy the embed snippet", "Allow your site's origin", "Add articles", "Try the assistant")

    # 5. Invite a teammate, from the Team tab.
    step("Invite a teammate").get_by_role("link", name="Team").click()
    form = page.get_by_role("form", name="Invite a person")
    form.get_by_label("Username or e-mail").fill("sam@acme.example")
    form.get_by_role("button", name="Invite").click()
    expect_done("Copy the embed snippet", "Allow your site's origin", "Add articles", "Try the assistant",
                "Invite a teammate")
    expect(checklist).to_contain_text("All set")
    shoot(page, "checklist-done")

    # Test retrieval: a question in, the ranked chunks and their scores out (over the demo
    # help centre too, so that there is a ranking to read), retrieved by the session
    # platform's CPU worker.
    import_help_centre(created.tenant)
    tenant_nav(page, "Acme Outdoor").get_by_role("link", name="Knowledge").click()
    page.get_by_role("link", name="Test retrieval").click()
    page.get_by_label("Question").fill("How long before my parcel leaves the warehouse?")
    page.get_by_role("button", name="Test", exact=True).click()
    ranked = page.get_by_role("region", name="Ranked passages")
    rows = ranked.get_by_role("row")
    expect(rows.nth(1)).to_contain_text("Delivery times")
    expect(rows.nth(1)).to_contain_text("given")
    expect(rows.filter(has_text="beyond k = 3").first).to_contain_text("left out")
    scores = [float(s) for s in ranked.locator("[data-score]").evaluate_all("els => els.map(e => e.dataset.score)")]
    assert len(scores) > 3 and scores == sorted(scores, reverse=True) and 0 < scores[0] < 1, scores
    shoot(page, "test-retrieval")
    page.context.close()


def test_the_operator_overview_starts_with_health_and_finds_a_tenant_as_typed(live_server, browser, shoot):
    from playwright.sync_api import expect

    from inference.wire.connections import get_redis
    from inference.worker.heartbeats import HeartbeatThread

    for slug, name in (("acme", "Acme Outdoor"), ("globex", "Globex Insurance"), ("umbrella", "Umbrella Health")):
        services.tenant_create(slug=slug, name=name, allowed_origins=[])
    operator = user(username="opal", is_staff=True)
    # A CPU worker's heartbeat, as the worker writes it; the pools' workers are missing.
    beat = HeartbeatThread(get_redis(), name="cpu.shared@web-1:7", role="cpu", pool="shared",
                           static={"device": "cpu"}, dynamic=lambda: {})
    page = signed_in(browser, live_server.url, operator.username)
    beat.start()  # beating every INTERVAL_S while the pages load, as a worker's thread does
    try:
        page.goto(f"{live_server.url}/console/")
        health = page.get_by_role("region", name="Platform health")
        expect(health.locator('[data-check="database"]')).to_contain_text("ok")
        expect(health.locator('[data-check="redis"]')).to_contain_text("ok")
        # The tiers /readyz checks: the CPU tier, and each pool a tenant is allocated to.
        expect(health.locator('[data-check="workers-cpu"]')).to_contain_text(re.compile(r"[1-9]\d* live"))
        expect(health.locator('[data-check="workers-prefill.shared"]')).to_contain_text("Workers for prefill.shared")
        expect(health.locator('[data-check="workers-decode.shared"]')).to_be_visible()
        assert health.bounding_box()["y"] < page.locator("#live table").first.bounding_box()["y"]
        page.get_by_label("Search tenants").fill("glob")
        expect(page.locator("#tenant-count")).to_contain_text("1 of 3 tenants matching “glob”")
        expect(page.get_by_role("link", name="Globex Insurance")).to_be_visible()
        expect(page.get_by_role("link", name="Acme Outdoor")).to_have_count(0)
        shoot(page, "overview-health")
        page.goto(f"{live_server.url}/console/hardware/")
        expect(page.get_by_role("region", name="CPU tier")).to_contain_text("cpu.shared@web-1:7")
        expect(page.get_by_role("region", name="Workers outside any pool")).to_have_count(0)
    finally:
        beat.stop()
        page.context.close()
