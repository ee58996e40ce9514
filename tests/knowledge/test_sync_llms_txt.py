"""A website source whose URL is an llms.txt, against a real site on 127.0.0.1 (allowed
by the operator setting): exactly the pages it lists are synced (Markdown twins keep
their headings; off-host and robots-disallowed entries are left alone), a page dropped
from the list loses its article on the next sync, and a file that lists nothing fails
the sync with a message saying what an llms.txt holds."""

from __future__ import annotations

import pytest

from knowledge import sources
from knowledge.llms_txt import llms_txt_links
from knowledge.models import Article, Chunk
from tests.factories import make_tenant

from .conftest import run_sync
from .site import Site, page

pytestmark = pytest.mark.django_db

DERAILLEUR_MD = b"""# Derailleur adjustment

## Limit screws

Turn the H screw until the chain cannot drop past the smallest cog.

## Cable tension

A quarter turn of the barrel adjuster moves the chain one cog.
"""


def llms_txt(base: str, *entries: str) -> bytes:
    return ("# Bike Co. help\n\n> Answers about keeping a bike running, with [our shop](/shop).\n\n"
            "## Docs\n\n" + "".join(f"{e}\n" for e in entries)).encode()


@pytest.fixture
def site(settings):
    settings.TANDEM_OUTBOUND_ALLOW_HOSTS = ["127.0.0.1"]
    with Site() as s:
        s.file("/robots.txt", "text/plain", b"User-agent: *\nDisallow: /private/\n")
        s.file("/docs/derailleur.md", "text/markdown; charset=utf-8", DERAILLEUR_MD)
        s.file("/docs/tyres.txt", "text/plain", b"Road tyres run at six to eight bar.\n")
        s.html("/brakes", page("Brake pads", "<p>Replace the pads when the groove is worn away.</p>"))
        s.file("/private/staff.md", "text/markdown", b"# Staff discounts\n\nStaff get forty percent off.\n")
        s.file("/llms.txt", "text/plain", llms_txt(
            s.base,
            "- [Derailleur adjustment](/docs/derailleur.md): shifting that skips",
            f"- [Tyre pressure]({s.base}/docs/tyres.txt)",
            "- [Brake pads](/brakes)",
            "- [Staff](/private/staff.md)",
            "- [Elsewhere](http://example.invalid/page.md)",
            "\n## Optional\n",
            "- [Tyres again](/docs/tyres.txt#pressure)"))
        yield s


def test_an_llms_txt_source_syncs_exactly_the_pages_it_lists_and_drops_those_it_no_longer_lists(site):
    source = sources.source_create(tenant=make_tenant().tenant, kind="website", name="Docs",
                                   url=site.base + "/llms.txt", delay_ms=0)
    source = run_sync(source)

    assert source.status == "synced", source.error
    got = {a.title: a for a in Article.objects.filter(origin=source)}
    # A Markdown page's title is its H1; a plain-text page with none takes its link's name.
    assert set(got) == {"Derailleur adjustment", "Tyre pressure", "Brake pads"}
    assert got["Tyre pressure"].locator == site.base + "/docs/tyres.txt"
    assert site.hits["/private/staff.md"] == 0 and site.hits["/shop"] == 0  # robots.txt; the summary's link
    assert (source.found, source.fetched, source.failed) == (3, 3, 0)
    headings = set(Chunk.objects.filter(article=got["Derailleur adjustment"]).values_list("heading", flat=True))
    assert headings == {"Limit screws", "Cable tension"}  # the Markdown's sections, for chunks and citations

    site.file("/llms.txt", "text/plain", llms_txt(site.base, "- [Derailleur adjustment](/docs/derailleur.md)",
                                                  "- [Brake pads](/brakes)"))
    source = run_sync(sources.source_sync_request(source=source))

    assert source.status == "synced", source.error
    assert set(Article.objects.filter(origin=source).values_list("title", flat=True)) == \
        {"Derailleur adjustment", "Brake pads"}
    assert source.changed == 1  # the tyre page removed; the others answered 304


def test_an_llms_txt_that_lists_no_page_fails_the_sync_saying_what_one_holds(site):
    site.file("/llms.txt", "text/plain", b"# Bike Co.\n\nSee our [help centre](/help) for answers.\n")
    source = run_sync(sources.source_create(tenant=make_tenant().tenant, kind="website", name="Docs",
                                            url=site.base + "/llms.txt", delay_ms=0))
    assert source.status == "failed"
    assert "lists no pages" in source.error and "- [Returns](/returns.md)" in source.error
    assert not Article.objects.filter(origin=source).exists()


def test_an_llms_txt_served_as_html_is_refused_by_its_content_type(site):
    site.html("/llms.txt", "<html><body>Not found</body></html>")
    source = run_sync(sources.source_create(tenant=make_tenant().tenant, kind="website", name="Docs",
                                            url=site.base + "/llms.txt", delay_ms=0))
    assert source.status == "failed" and "text/html" in source.error


def test_the_llms_txt_parser_takes_each_list_items_first_link_once_and_bounds_a_hostile_line():
    text = ("# Site\n> a [summary link](/s)\n## Docs\n- [Returns](returns.md): how\n"
            "* [Shipping](<https://help.example.com/ship.md> \"Ship\")\n+ [Again](/docs/returns.md#top)\n"
            "- no link here\n- [Mail](mailto:help@example.com)\n" + "- " + "[" * 100_000 + "\n")
    links = llms_txt_links(text, base="https://help.example.com/docs/llms.txt")
    assert [(link.url, link.name) for link in links] == [
        ("https://help.example.com/docs/returns.md", "Returns"), ("https://help.example.com/ship.md", "Shipping")]
