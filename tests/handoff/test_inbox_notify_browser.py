"""An agent's notifications in a real browser (Chromium driven by Playwright) against the
running platform (daphne serves the console and the sockets): the agent switches desktop
notifications on (the browser's permission is granted, as a person clicking "Allow"
would), moves to another console page, and a visitor's hand-over, then the visitor's
message in the conversation she took, each create a Notification (a spy wraps
window.Notification and records them). The visitor's socket said which page it was on
and its browser: the conversation's side panel shows both."""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import quote

import pytest
import websockets.sync.client as ws_client

from tandem.chat.models import Conversation
from tandem.handoff import inbox, states
from tenants.models import Membership
from tests.browser import sign_in
from tests.factories import make_tenant
from tests.platform_fixtures import ORIGIN, ChatSocket
from tests.world import user

pytestmark = pytest.mark.django_db(transaction=True)
FIREFOX = "Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0"
# Records every notification the page creates, then creates it as the browser would.
SPY = """
(() => {
  const Real = window.Notification;
  if (!Real) return;
  window.__notes = [];
  class Spy extends Real {
    constructor(title, options) {
      window.__notes.push({ title, body: (options || {}).body || "", tag: (options || {}).tag || "" });
      super(title, options);
    }
  }
  Object.defineProperty(Spy, "permission", { get: () => Real.permission });
  Spy.requestPermission = (...a) => Real.requestPermission(...a);
  window.Notification = Spy;
})();
"""


def test_an_agent_opts_in_and_is_notified_of_a_hand_over_and_of_her_visitors_message(platform, browser, tmp_path):
    from playwright.sync_api import expect

    created = make_tenant(slug="acme-notify")
    acme = created.tenant
    maya = user(username="maya-notify", first_name="Maya")
    Membership.objects.create(user=maya, tenant=acme, role=Membership.Role.AGENT)
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(20_000)
    context.grant_permissions(["notifications"], origin=platform.base_url)
    context.add_init_script(SPY)
    page = context.new_page()
    sign_in(page, platform.base_url, maya.username)
    expect(page).to_have_url(f"{platform.base_url}/console/t/{acme.slug}/inbox/")

    settings = page.get_by_role("group", name="Notify me in this browser")
    settings.get_by_label("Desktop notifications").check()
    expect(settings.get_by_role("status")).to_have_text("Desktop notifications are on in this browser.")
    out = Path(os.environ.get("TANDEM_CONSOLE_SCREENSHOTS") or tmp_path)
    out.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(out / "inbox-notifications.png"), full_page=True)
    # Remembered for her in this browser: on another console page, the feed opens by itself.
    page.goto(f"{platform.base_url}/console/t/{acme.slug}/conversations/")
    page.wait_for_function("document.documentElement.dataset.notifyFeed === 'ready'")

    query = f"key={quote(created.widget_key.plaintext)}&page={quote('https://acme.example/tents?color=green')}"
    with ws_client.connect(f"{platform.ws_url}/ws/chat/?{query}", origin=ORIGIN, open_timeout=20,
                           user_agent_header=FIREFOX) as conn:
        chat = ChatSocket(conn)
        chat.send({"type": "handoff", "conversation": None})
        cid = chat.recv()["id"]
        chat.recv_until(lambda f: f["type"] == "handoff")
        conv = Conversation.objects.get(pk=cid)
        name = inbox.visitor_name(conv)
        page.wait_for_function("window.__notes.length >= 1")
        assert page.evaluate("window.__notes[0]") == {
            "title": f"{name} is waiting for a person", "body": "Open the inbox to answer.", "tag": f"handover:{cid}"}

        states.conversation_claim(conversation=conv, agent=maya)  # hers now: her visitor's messages notify
        chat.recv_until(lambda f: f["type"] == "handoff" and f["state"] == "human")
        chat.send({"type": "message", "text": "The green one, size 2", "conversation": cid})
        chat.recv_until(lambda f: f["type"] == "received")
        page.wait_for_function("window.__notes.length >= 2")
        assert page.evaluate("window.__notes[1]") == {
            "title": f"{name} wrote", "body": "The green one, size 2", "tag": f"message:{cid}"}
    assert page.evaluate("window.__notes.length") == 2  # her own claim told her nothing

    conv.refresh_from_db()
    assert (conv.page_url, conv.user_agent) == ("https://acme.example/tents", FIREFOX)  # no query kept
    page.goto(f"{platform.base_url}/console/t/{acme.slug}/inbox/{cid}/")
    side = page.get_by_role("complementary", name="About the visitor")
    expect(side.get_by_role("link", name="https://acme.example/tents")).to_be_visible()
    expect(side).to_contain_text("Firefox 133 on Linux")
    context.close()
