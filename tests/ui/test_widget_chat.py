"""The embedded widget's conversation in a real browser: streaming, persistence across
reloads and tabs, starting over."""

from __future__ import annotations

import pytest

from tandem.chat.models import Conversation, Message
from tests.factories import make_tenant
from tests.ui.conftest import embed_page, wait_for_event, wait_for_reply_text

pytestmark = pytest.mark.django_db(transaction=True)

# Every bubble's text and the typing indicator, as the DOM changes (MutationObserver:
# each change the widget makes, no polling).
WATCH = """() => {
  const root = document.querySelector("tandem-chat").shadowRoot;
  window.__texts = []; window.__statuses = [];
  new MutationObserver(() => {
    const bubbles = root.querySelectorAll(".msg.assistant");
    const last = bubbles[bubbles.length - 1].textContent;
    if (window.__texts[window.__texts.length - 1] !== last) window.__texts.push(last);
    const status = root.querySelector("[role=status]").textContent;
    if (status && window.__statuses[window.__statuses.length - 1] !== status) window.__statuses.push(status);
  }).observe(root, {subtree: true, childList: true, characterData: true});
}"""


def test_a_visitor_opens_the_widget_sends_a_message_and_sees_the_reply_stream(platform, context, host_site):
    from playwright.sync_api import expect

    tenant = make_tenant(origins=[host_site.origin], max_output_tokens=24)
    requested = []
    context.on("request", lambda r: requested.append(r.url))
    page = context.new_page()
    page.goto(host_site.page("/stream", embed_page(platform, tenant.widget_key.plaintext)))
    page.get_by_role("button", name="Open chat").click()
    box = page.get_by_role("textbox", name="Message")
    expect(box).to_be_focused()
    page.evaluate(WATCH)
    box.fill("Hello! What are your opening hours?")
    page.get_by_role("button", name="Send").click()
    expect(page.get_by_role("button", name="Stop")).to_be_visible()
    reply = wait_for_event(page, "message", role="assistant")[0]

    stored = Message.objects.get(role="assistant", conversation__tenant=tenant.tenant)
    assert stored.status == "done" and stored.content.strip()
    assert reply["text"] == stored.content  # every token once, in order
    texts = [t for t in page.evaluate("window.__texts") if t]
    assert len(texts) >= 4, texts  # it grew over several renders before it ended
    assert "The assistant is typing…" in page.evaluate("window.__statuses")
    expect(page.get_by_role("button", name="Stop")).to_be_hidden()
    # Screen readers hear the finished reply.
    live = page.locator("tandem-chat [aria-live=polite]")
    expect(live).to_contain_text(stored.content.strip()[:20])
    assert Conversation.objects.get(tenant=tenant.tenant).visitor_id
    # Nothing came from anywhere but the site and Tandem.
    origins = {"/".join(url.split("/")[:3]) for url in requested}
    assert origins == {host_site.origin, platform.base_url}, requested


# At document start, before the widget runs: the reply this page had when it went away
# (the widget's localStorage, documented in docs/widget.md).
PENDING_AT_LOAD = """
window.__pendingAtLoad = null;
for (let i = 0; i < localStorage.length; i++) {
  const k = localStorage.key(i);
  if (k.startsWith("tandem:") && k.includes(":p:")) window.__pendingAtLoad = JSON.parse(localStorage.getItem(k));
}
"""


def _frames_sent(page) -> list[dict]:
    import json

    sent = []
    page.on("websocket", lambda ws: ws.on("framesent", lambda payload: sent.append(json.loads(payload))))
    return sent


def test_a_reload_mid_reply_brings_the_transcript_back_and_the_reply_finishes_without_repeats(
        platform, context, host_site):
    from playwright.sync_api import expect

    tenant = make_tenant(origins=[host_site.origin], max_output_tokens=80)
    context.add_init_script(PENDING_AT_LOAD)
    page = context.new_page()
    page.goto(host_site.page("/reload-mid", embed_page(platform, tenant.widget_key.plaintext)))
    page.get_by_role("button", name="Open chat").click()
    question = "Write a long story about a lighthouse keeper and her cat."
    page.get_by_role("textbox", name="Message").fill(question)
    page.keyboard.press("Enter")
    wait_for_reply_text(page)
    sent = _frames_sent(page)
    page.reload()

    had = page.evaluate("window.__pendingAtLoad")
    assert had is not None and had["i"] >= 0, "the reply had not started, or had ended, at the reload"
    # The panel is open again and the transcript is back.
    expect(page.locator("tandem-chat .msg.user")).to_have_text(question)
    reply = wait_for_event(page, "message", role="assistant")[0]
    stored = Message.objects.get(role="assistant", conversation__tenant=tenant.tenant)
    resumes = [f for f in sent if f["type"] == "resume"]
    assert resumes == [{"type": "resume", "message": str(stored.pk), "after": had["i"]}]
    assert stored.completion_tokens > had["i"] + 1  # tokens did arrive after the reload
    assert reply["text"].startswith(had["t"])
    assert reply["text"] == stored.content  # nothing repeated, nothing missing


def test_after_a_reply_a_reload_and_a_second_tab_show_the_same_conversation(platform, context, host_site):
    from playwright.sync_api import expect

    tenant = make_tenant(origins=[host_site.origin], max_output_tokens=12)
    url = host_site.page("/two-tabs", embed_page(platform, tenant.widget_key.plaintext))
    first = context.new_page()
    first.goto(url)
    first.get_by_role("button", name="Open chat").click()
    first.get_by_role("textbox", name="Message").fill("Do you ship to Norway?")
    first.keyboard.press("Enter")
    reply = wait_for_event(first, "message", role="assistant")[0]["text"]

    first.reload()
    expect(first.locator("tandem-chat .msg.user")).to_have_text("Do you ship to Norway?")
    expect(first.locator("tandem-chat .msg.assistant")).to_have_count(2)  # the greeting and the reply
    restored = first.locator("tandem-chat .msg.assistant").last.inner_text()

    second = context.new_page()
    second.goto(url)
    second.get_by_role("button", name="Open chat").click()
    expect(second.locator("tandem-chat .msg.user")).to_have_text("Do you ship to Norway?")
    expect(second.locator("tandem-chat .msg.assistant").last).to_have_text(restored)
    assert restored.split()[:2] == reply.split()[:2]

    # What one tab sends, the other shows too, reply included.
    second.get_by_role("textbox", name="Message").fill("And to Iceland?")
    second.keyboard.press("Enter")
    later = wait_for_event(second, "message", role="assistant")[0]["text"]
    expect(first.locator("tandem-chat .msg.user")).to_have_text(["Do you ship to Norway?", "And to Iceland?"])
    expect(first.locator("tandem-chat .msg.assistant")).to_have_count(3)
    expect(first.locator("tandem-chat .msg.assistant").last).to_have_text(
        second.locator("tandem-chat .msg.assistant").last.inner_text())
    assert Conversation.objects.filter(tenant=tenant.tenant).count() == 1
    assert Message.objects.filter(conversation__tenant=tenant.tenant, role="assistant").last().content == later


def _seed_conversation(tenant, visitor: str, reply: str) -> Conversation:
    conv = Conversation.objects.create(tenant=tenant, channel="widget", visitor_id=visitor)
    Message.objects.create(conversation=conv, role="user", content="Hello")
    Message.objects.create(conversation=conv, role="assistant", content=reply, status="done")
    return conv


def seed_storage(context, key: str, visitor: str, conversation) -> str:
    """The widget's localStorage (docs/widget.md) as a visitor who chatted before has it:
    the server's signed token for `visitor` (returned)."""
    import json

    from tandem.chat.visitors import visitor_token_for
    from tenants import keys
    from tenants.models import ApiKey

    visitor = visitor_token_for(tenant=ApiKey.objects.get(key_hash=keys.hash_key(key)).tenant, visitor_id=visitor)
    state = {"v": 1, "visitor": visitor, "conversations": {"anon": str(conversation.pk)}, "rev": 1}
    context.add_init_script(f"""if (!sessionStorage.getItem("seeded")) {{
        sessionStorage.setItem("seeded", "1");
        localStorage.setItem({json.dumps("tandem:" + key[:16])}, {json.dumps(json.dumps(state))}); }}""")
    return visitor


def test_new_conversation_and_reset_start_over(platform, context, host_site):
    from playwright.sync_api import expect

    tenant = make_tenant(origins=[host_site.origin])
    conv = _seed_conversation(tenant.tenant, "visitor-seeded", "We open at nine.")
    key = tenant.widget_key.plaintext
    token = seed_storage(context, key, "visitor-seeded", conv)
    page = context.new_page()
    page.goto(host_site.page("/start-over", embed_page(platform, key)))
    page.get_by_role("button", name="Open chat").click()
    expect(page.locator("tandem-chat .msg.assistant").last).to_have_text("We open at nine.")

    page.get_by_role("button", name="More options").click()
    page.get_by_role("menuitem", name="New conversation").click()
    expect(page.locator("tandem-chat .msg")).to_have_count(1)  # the greeting alone
    expect(page.get_by_role("textbox", name="Message")).to_be_focused()
    page.reload()
    expect(page.get_by_role("dialog")).to_be_visible()  # it stays open across pages of the site
    expect(page.locator("tandem-chat .msg")).to_have_count(1)
    state = page.evaluate(f"JSON.parse(localStorage.getItem('tandem:{key[:16]}'))")
    assert state["visitor"] == token and state["conversations"] == {}

    page.evaluate("Tandem.reset()")
    state = page.evaluate(f"JSON.parse(localStorage.getItem('tandem:{key[:16]}'))")
    assert state["visitor"] != token
    assert Conversation.objects.filter(tenant=tenant.tenant).count() == 1  # nothing new until a message
