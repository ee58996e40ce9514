"""A grounded reply in the embedded widget names its sources: the articles of the `end`
frame's `sources` that have an http(s) URL, as links under the reply that open in a new
tab; the others are not links."""

from __future__ import annotations

import pytest

from knowledge import services
from knowledge.models import Article, Citation
from tests.factories import make_tenant
from tests.ui.conftest import embed_page, wait_for_event

pytestmark = pytest.mark.django_db(transaction=True)


def _indexed(tenant, **fields) -> Article:
    article = services.article_create(tenant=tenant, **fields)
    services.article_index(article_id=article.pk)
    return article


def test_a_grounded_reply_shows_its_sources_with_a_web_address_as_links(platform, context, host_site):
    from playwright.sync_api import expect

    created = make_tenant(origins=[host_site.origin], max_output_tokens=8)
    tenant = created.tenant
    _indexed(tenant, title="Charged twice", url="https://help.example.com/charged-twice",
             body="Charged twice for one order? The second charge is an authorisation hold.")
    _indexed(tenant, title="Two charges on a statement", body="Charged twice on a statement: it clears in days.")
    scripted = _indexed(tenant, title="Card charged twice", url="https://help.example.com/card",
                        body="A card charged twice is refunded by the bank.")
    # A URL stored past the service's check (an old row, a hand edit): never a link.
    Article.objects.filter(pk=scripted.pk).update(url="javascript:alert(document.domain)")

    page = context.new_page()
    page.goto(host_site.page("/sources", embed_page(platform, created.widget_key.plaintext)))
    page.get_by_role("button", name="Open chat").click()
    page.get_by_role("textbox", name="Message").fill("Why was my card charged twice?")
    page.get_by_role("button", name="Send").click()
    reply = wait_for_event(page, "message", role="assistant")[0]

    cited = list(Citation.objects.filter(message_id=reply["id"]).order_by("rank").values_list("title", "url"))
    assert len(cited) == 3, cited  # all three grounded the reply: one source has a URL that links
    sources = page.get_by_role("list", name="Sources")
    expect(sources).to_have_count(1)
    links = sources.get_by_role("link")
    expect(links).to_have_count(1)
    expect(links).to_have_text("Charged twice")
    expect(links).to_have_attribute("href", "https://help.example.com/charged-twice")
    expect(links).to_have_attribute("target", "_blank")
    expect(links).to_have_attribute("rel", "noopener")
    # The list sits in the reply's own bubble, right after its text (the rating group,
    # "Rate this reply", comes after it, at the bubble's end).
    bubble = page.locator("tandem-chat .msg.assistant").last
    expect(bubble.locator(".src a")).to_have_count(1)
    assert bubble.evaluate("el => el.querySelector(':scope > .md').nextElementSibling.matches('ul.src')")
    assert bubble.evaluate("el => el.lastElementChild.matches('.fb[role=group]')")
    # A reload restores the conversation (and the open panel) from its history, sources included.
    page.reload()
    restored = page.locator("tandem-chat .msg.assistant").last
    expect(restored.locator(".src a")).to_have_attribute("href", "https://help.example.com/charged-twice")
