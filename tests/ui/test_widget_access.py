"""The widget for everyone: the keyboard alone, a phone, contrast, reduced motion, and a
second language."""

from __future__ import annotations

import re

import pytest

from tandem.chat.widget import contrast_ratio
from tests.factories import make_tenant
from tests.ui.conftest import embed_page, wait_for_event

pytestmark = pytest.mark.django_db(transaction=True)


def _focused(locator) -> bool:
    return locator.evaluate("el => el.getRootNode().activeElement === el")


def test_a_keyboard_only_conversation(platform, context, host_site):
    from playwright.sync_api import expect

    tenant = make_tenant(origins=[host_site.origin], max_output_tokens=16)
    page = context.new_page()
    page.goto(host_site.page("/keyboard", embed_page(platform, tenant.widget_key.plaintext,
                                                     body='<a href="#top">Back to top</a>')))
    launcher = page.get_by_role("button", name="Open chat")
    expect(launcher).to_be_visible()
    for _ in range(5):  # from the page's own link to the launcher
        page.keyboard.press("Tab")
        if _focused(launcher):
            break
    assert _focused(launcher), "the launcher is not reachable with Tab"
    ring = launcher.evaluate("el => [getComputedStyle(el).outlineStyle, getComputedStyle(el).outlineWidth]")
    assert ring == ["solid", "3px"]  # focus is visible

    page.keyboard.press("Enter")
    box = page.get_by_role("textbox", name="Message")
    expect(box).to_be_focused()  # focus moves into the panel
    page.keyboard.type("Hi")
    page.keyboard.press("Shift+Enter")
    page.keyboard.type("are you open today?")
    assert box.input_value() == "Hi\nare you open today?"
    page.keyboard.press("Enter")
    expect(page.locator("tandem-chat .msg.user")).to_have_text("Hi\nare you open today?")
    expect(page.get_by_role("button", name="Stop")).to_be_visible()

    page.keyboard.press("Escape")  # closes the panel while the reply streams
    expect(page.get_by_role("dialog")).to_be_hidden()
    expect(launcher).to_be_focused()
    wait_for_event(page, "message", role="assistant")
    expect(page.locator("tandem-chat .badge")).to_have_text("1")  # it arrived while closed
    expect(launcher).to_have_accessible_description("1 new reply")

    page.keyboard.press("Enter")
    expect(box).to_be_focused()
    expect(page.locator("tandem-chat .badge")).to_be_hidden()
    expect(page.locator("tandem-chat .msg.assistant")).to_have_count(2)
    # Back through the panel to its menu, and out again with Escape. The finished reply's
    # rating buttons sit in the conversation, after it, and are reachable with the keyboard.
    page.keyboard.press("Shift+Tab")
    expect(page.get_by_role("button", name="Not helpful")).to_be_focused()
    page.keyboard.press("Shift+Tab")
    expect(page.get_by_role("button", name="Helpful", exact=True)).to_be_focused()
    page.keyboard.press("Shift+Tab")  # the conversation (scrollable with the keyboard)
    expect(page.get_by_role("region", name="Conversation")).to_be_focused()
    page.keyboard.press("Shift+Tab")
    expect(page.get_by_role("button", name="Close chat")).to_be_focused()
    page.keyboard.press("Shift+Tab")
    options = page.get_by_role("button", name="More options")
    expect(options).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.get_by_role("menuitem", name="New conversation")).to_be_focused()
    page.keyboard.press("Escape")
    expect(page.get_by_role("menu")).to_be_hidden()
    expect(options).to_be_focused()
    page.keyboard.press("Escape")
    expect(launcher).to_be_focused()


def _rgb(css: str) -> str:
    r, g, b = (int(x) for x in re.findall(r"\d+", css)[:3])
    return f"#{r:02x}{g:02x}{b:02x}"


# Text and the background it is drawn on, for the widget's parts that carry text.
PAIRS = """root => [".panel header h2", ".msg.assistant", ".msg.user", "textarea", ".btn"].map(sel => {
  const el = root.querySelector(sel);
  let bg = el, color = getComputedStyle(el).color;
  while (bg && getComputedStyle(bg).backgroundColor === "rgba(0, 0, 0, 0)") bg = bg.parentElement;
  return [sel, color, getComputedStyle(bg).backgroundColor];
})"""


@pytest.mark.parametrize("colour", ["#ffd400", "#1f4d3a"])
def test_on_a_375px_phone_the_panel_is_full_screen_readable_and_still(platform, browser, host_site, colour):
    from playwright.sync_api import expect

    created = make_tenant(origins=[host_site.origin], max_output_tokens=4)
    created.tenant.widget_color = colour
    created.tenant.save()
    ctx = browser.new_context(viewport={"width": 375, "height": 667}, reduced_motion="reduce", has_touch=True)
    try:
        page = ctx.new_page()
        page.goto(host_site.page(f"/phone-{colour[1:]}", embed_page(platform, created.widget_key.plaintext)))
        page.get_by_role("button", name="Open chat").click()
        panel = page.get_by_role("dialog")
        expect(panel).to_be_visible()
        assert {k: round(v) for k, v in panel.bounding_box().items()} == {"x": 0, "y": 0, "width": 375, "height": 667}
        expect(page.get_by_role("button", name="Open chat")).to_be_hidden()
        assert panel.evaluate("el => getComputedStyle(el).animationName") == "none"  # reduced motion
        # 16 px, so that phones do not zoom into the page when the box gets focus.
        assert page.get_by_role("textbox", name="Message").evaluate("el => getComputedStyle(el).fontSize") == "16px"

        page.get_by_role("textbox", name="Message").fill("Hello")  # a user bubble, in the tenant's colour
        page.keyboard.press("Enter")
        expect(page.locator("tandem-chat .msg.user")).to_have_text("Hello")
        root = page.locator("tandem-chat").evaluate_handle("el => el.shadowRoot")
        for sel, fg, bg in root.evaluate(PAIRS):
            assert contrast_ratio(_rgb(fg), _rgb(bg)) >= 4.5, (sel, fg, bg)  # WCAG AA
        # The bubble shows before the server has stored the message: wait for the reply, or
        # the test database's flush after the test races the server's insert (seen in CI).
        wait_for_event(page, "message", role="assistant")
    finally:
        ctx.close()


def test_the_panel_moves_in_unless_the_visitor_asks_for_less_motion(platform, context, host_site):
    from playwright.sync_api import expect

    created = make_tenant(origins=[host_site.origin])
    page = context.new_page()
    page.goto(host_site.page("/motion", embed_page(platform, created.widget_key.plaintext)))
    page.get_by_role("button", name="Open chat").click()
    expect(page.get_by_role("dialog")).to_be_visible()
    assert page.get_by_role("dialog").evaluate("el => getComputedStyle(el).animationName") == "tandem-in"


def test_the_widget_speaks_the_page_or_browser_language(platform, browser, host_site):
    from playwright.sync_api import expect

    created = make_tenant(origins=[host_site.origin])
    key = created.widget_key.plaintext
    for name, ctx_locale, settings in [("page", "en-US", {"locale": "fr"}), ("browser", "fr-CA", None)]:
        ctx = browser.new_context(locale=ctx_locale)
        try:
            page = ctx.new_page()
            page.goto(host_site.page(f"/lang-{name}", embed_page(platform, key, settings=settings)))
            page.get_by_role("button", name="Ouvrir le chat").click()
            expect(page.get_by_role("button", name="Fermer le chat")).to_be_visible()
            expect(page.get_by_role("button", name="Envoyer")).to_be_visible()
            expect(page.locator("tandem-chat .msg.assistant")).to_have_text("Bonjour ! Comment pouvons-nous vous aider ?")
        finally:
            ctx.close()
