"""The widget against what a site or a reply may throw at it: an origin the key does not
allow, hostile host CSS, HTML in a reply, a visitor whose identity does not verify."""

from __future__ import annotations

import pytest

from tandem.chat.models import Conversation, Message
from tenants import keys
from tests.factories import make_tenant
from tests.ui.conftest import embed_page, events, wait_for_event
from tests.ui.test_widget_chat import seed_storage

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_page_whose_origin_is_not_allowed_shows_the_refusal_in_the_panel(platform, context, host_site,
                                                                            other_site):
    from playwright.sync_api import expect

    tenant = make_tenant(origins=[host_site.origin])
    page = context.new_page()
    page.goto(other_site.page("/not-allowed", embed_page(platform, tenant.widget_key.plaintext)))
    page.get_by_role("button", name="Open chat").click()
    alert = page.get_by_role("alert")
    expect(alert).to_contain_text(f"This chat is not enabled for this website ({other_site.origin})")
    expect(alert).to_contain_text("allowed origins")
    expect(page.get_by_role("textbox", name="Message")).to_be_disabled()
    assert [e["code"] for e in events(page, "error")] == ["origin_not_allowed"]
    assert not Conversation.objects.filter(tenant=tenant.tenant).exists()


HOSTILE_CSS = """<style>
* { all: unset; }
div { display: none !important; }
html, body { font-size: 60px !important; line-height: 3 !important; }
p, span, button, textarea { font-size: 72px !important; color: #f0f !important; }
body { font-family: "Comic Sans MS", cursive; }
body > * { transform: scale(1.5) !important; text-transform: uppercase !important; opacity: .5 !important; }
</style>"""
HOST_BODY = """<div id="promo">Sale!</div><p id="intro">Our products.</p><button id="buy">Buy</button>
<span id="note">Note</span>"""
# The host's own elements, their styles as computed (what a widget that restyled the host
# would change).
HOST_STYLES = """() => [...document.querySelectorAll("html, body, h1, p, div, button, span, script")]
  .filter(el => !el.closest("tandem-chat"))
  .map(el => { const s = getComputedStyle(el);
    return [el.tagName, el.id, s.display, s.fontSize, s.fontFamily, s.color, s.lineHeight, s.margin, s.position]; })"""


def test_hostile_host_css_leaves_a_working_widget_and_the_widget_leaves_the_host_styles_alone(
        platform, context, host_site):
    from playwright.sync_api import expect

    tenant = make_tenant(origins=[host_site.origin], max_output_tokens=8)
    bare = context.new_page()
    bare.goto(host_site.page("/hostile-bare", f"<!doctype html><html><head>{HOSTILE_CSS}</head><body>"
                                              f"<h1>A shop</h1><p>Welcome to our shop.</p>{HOST_BODY}</body></html>"))
    before = bare.evaluate(HOST_STYLES)
    page = context.new_page()
    page.goto(host_site.page("/hostile", embed_page(platform, tenant.widget_key.plaintext,
                                                    head=HOSTILE_CSS, body=HOST_BODY)))
    page.emulate_media(reduced_motion="reduce")  # measure the panel where it ends, not as it slides in
    launcher = page.get_by_role("button", name="Open chat")
    expect(launcher).to_be_visible()
    box = launcher.bounding_box()
    assert {k: round(v) for k, v in box.items()} == {"x": 1280 - 20 - 56, "y": 800 - 20 - 56, "width": 56, "height": 56}
    launcher.click()
    panel = page.get_by_role("dialog")
    expect(panel).to_be_visible()
    p = panel.bounding_box()
    assert {k: round(v) for k, v in p.items()} == {"x": 1280 - 20 - 380, "y": 800 - 20 - 600, "width": 380, "height": 600}
    host = page.locator("tandem-chat")
    assert host.evaluate("el => [getComputedStyle(el).transform, getComputedStyle(el).opacity]") == ["none", "1"]
    textbox = page.get_by_role("textbox", name="Message")
    assert textbox.evaluate("el => getComputedStyle(el).fontSize") == "14px"
    assert page.locator("tandem-chat .msg.assistant").first.evaluate(
        "el => [getComputedStyle(el).display, getComputedStyle(el).fontSize, getComputedStyle(el).textTransform]"
    ) == ["block", "14px", "none"]
    textbox.fill("Hello there")
    page.get_by_role("button", name="Send").click()
    reply = wait_for_event(page, "message", role="assistant")[0]
    assert reply["text"] == Message.objects.get(role="assistant", conversation__tenant=tenant.tenant).content
    # The host page looks exactly as it does without the widget, and has no style of it.
    after = page.evaluate(HOST_STYLES)
    # (The embedding page has two more script elements than the bare one: its own.)
    assert [s for s in after if s[0] != "SCRIPT"] == [s for s in before if s[0] != "SCRIPT"]
    assert page.evaluate("document.styleSheets.length") == 1
    assert page.evaluate("document.adoptedStyleSheets.length") == 0


# A stored reply carrying everything that must not run; the widget renders it when it
# restores the transcript, through the same renderer as a streamed reply.
HOSTILE_REPLY = """Here is **bold**, *emphasis* and `code`:

- one
- two

```
let x = 1;
```

[a safe link](https://example.com/help) and [a bad one](javascript:window.__pwned=1)
and [another](JaVaScRiPt:window.__pwned=2) and ![pixel](https://tracker.example/p.gif)

<img src=x onerror="window.__pwned=3">
<script>window.__pwned=4</script>
<a href="javascript:window.__pwned=5">raw link</a>
<div onmouseover="window.__pwned=6">hover</div><svg onload="window.__pwned=7"></svg>
<iframe src="https://example.com"></iframe>"""


def test_html_in_a_reply_renders_inert_and_markdown_renders(platform, context, host_site):
    from playwright.sync_api import expect

    tenant = make_tenant(origins=[host_site.origin])
    conv = Conversation.objects.create(tenant=tenant.tenant, channel="widget", visitor_id="visitor-x")
    Message.objects.create(conversation=conv, role="user", content="<b>hi</b> <img src=x onerror=alert(1)>")
    Message.objects.create(conversation=conv, role="assistant", content=HOSTILE_REPLY, status="done")
    seed_storage(context, tenant.widget_key.plaintext, "visitor-x", conv)
    page = context.new_page()
    page.goto(host_site.page("/sanitiser", embed_page(platform, tenant.widget_key.plaintext)))
    page.get_by_role("button", name="Open chat").click()
    bubble = page.locator("tandem-chat .msg.assistant").last
    expect(bubble).to_contain_text("Here is bold")

    md = bubble.locator(".md")
    assert md.locator("strong").inner_text() == "bold"
    assert md.locator("em").inner_text() == "emphasis"
    assert md.locator("ul li").all_inner_texts() == ["one", "two"]
    assert md.locator("pre code").inner_text().strip() == "let x = 1;"
    links = md.locator("a")
    hrefs = [links.nth(i).get_attribute("href") for i in range(links.count())]
    assert "https://example.com/help" in hrefs
    assert not any(h and h.lower().replace(" ", "").startswith("javascript") for h in hrefs), hrefs
    safe = md.get_by_role("link", name="a safe link")
    assert safe.get_attribute("target") == "_blank" and "noopener" in safe.get_attribute("rel")
    # Nothing that runs or loads: no element with a handler, no script, image, frame, svg.
    assert md.locator("script, img, iframe, svg, div[onmouseover], [onerror], [onload]").count() == 0
    handlers = md.evaluate("el => [...el.querySelectorAll('*')].flatMap(e => e.getAttributeNames())"
                           ".filter(n => n.startsWith('on') || n === 'style' || n === 'src')")
    assert handlers == []
    # Raw HTML is shown as the text it is.
    expect(bubble).to_contain_text('<img src=x onerror="window.__pwned=3">')
    expect(bubble).to_contain_text("<script>window.__pwned=4</script>")
    expect(page.locator("tandem-chat .msg.user")).to_have_text("<b>hi</b> <img src=x onerror=alert(1)>")
    assert md.get_by_role("link", name="raw link").count() == 0
    assert page.evaluate("window.__pwned") is None


def test_a_reply_still_being_written_renders_its_half_written_markdown_sensibly(platform, context, host_site):
    import json

    from playwright.sync_api import expect

    tenant = make_tenant(origins=[host_site.origin])
    conv = Conversation.objects.create(tenant=tenant.tenant, channel="widget", visitor_id="visitor-y")
    key = tenant.widget_key.plaintext
    seed_storage(context, key, "visitor-y", conv)
    # Replies cut off mid-stream, as the page had them when it went away (docs/widget.md):
    # an open bold run, an open code span, an open code fence with HTML in it.
    partials = ["First **restart** it, then **run", "Type `pip ins",
                "```sh\nsudo systemctl <img src=x onerror=window.__pwned=1"]
    for text in partials:
        Message.objects.create(conversation=conv, role="user", content="How?")
        writing = Message.objects.create(conversation=conv, role="assistant", status="decoding")
        context.add_init_script(f"localStorage.setItem({json.dumps(f'tandem:{key[:16]}:p:{writing.pk}')}, "
                                f"{json.dumps(json.dumps({'i': 9, 't': text}))})")
    page = context.new_page()
    page.goto(host_site.page("/half-written", embed_page(platform, key)))
    page.get_by_role("button", name="Open chat").click()
    bubbles = page.locator("tandem-chat .msg.assistant .md")
    expect(bubbles).to_have_count(4)  # the greeting, then the three
    expect(bubbles.nth(1).locator("strong")).to_have_text(["restart", "run"])  # closed at the end
    expect(bubbles.nth(2).locator("code")).to_have_text("pip ins")
    expect(bubbles.nth(3).locator("pre code")).to_have_text("sudo systemctl <img src=x onerror=window.__pwned=1\n")
    assert page.locator("tandem-chat img").count() == 0 and page.evaluate("window.__pwned") is None
    expect(page.get_by_role("button", name="Stop")).to_be_visible()  # they are still being written


def test_identity_verification_refuses_a_wrong_hash_and_ties_the_conversation_to_a_verified_user(
        platform, context, host_site):
    from playwright.sync_api import expect

    from tenants.services import tenant_identity_secret_rotate

    created = make_tenant(origins=[host_site.origin], max_output_tokens=8)
    tenant = created.tenant
    tenant.identity_verification = True
    tenant.save()
    secret = tenant_identity_secret_rotate(tenant=tenant)
    right = keys.identity_hash(secret, "user-42")
    page = context.new_page()
    page.goto(host_site.page("/identity", embed_page(
        platform, created.widget_key.plaintext,
        settings={"user": {"id": "user-42", "name": "Ada", "email": "ada@example.test", "hash": "0" * 64}})))
    page.get_by_role("button", name="Open chat").click()
    expect(page.get_by_role("alert")).to_contain_text("We could not verify who you are")
    expect(page.get_by_role("textbox", name="Message")).to_be_disabled()
    assert "identity_verification_failed" in [e["code"] for e in events(page, "error")]
    assert not Conversation.objects.filter(tenant=tenant).exists()

    page.evaluate("hash => Tandem.identify({id: 'user-42', name: 'Ada', email: 'ada@example.test', hash})", right)
    expect(page.locator("tandem-chat [role=alert]")).to_be_empty()
    page.get_by_role("textbox", name="Message").fill("Where is my order?")
    page.keyboard.press("Enter")
    wait_for_event(page, "message", role="assistant")
    conv = Conversation.objects.get(tenant=tenant)
    assert (conv.user_id, conv.user_verified, conv.user_name, conv.user_email) == (
        "user-42", True, "Ada", "ada@example.test")
    assert list(conv.messages.filter(role="user").values_list("content", flat=True)) == ["Where is my order?"]
