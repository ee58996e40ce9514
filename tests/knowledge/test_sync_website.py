"""A website source kept in step with a real site on 127.0.0.1 (allowed by the
operator setting): a sitemap, robots.txt, a redirect; then a re-sync after a page
changed and one was removed gives exactly the right articles, and costs nothing for
the pages that did not change."""

from __future__ import annotations

import pytest

from knowledge import sources
from knowledge.models import Article, Chunk, Source
from tests.factories import make_tenant

from .conftest import run_sync
from .site import Site, page

pytestmark = pytest.mark.django_db


@pytest.fixture
def site(settings):
    settings.TANDEM_OUTBOUND_ALLOW_HOSTS = ["127.0.0.1"]
    with Site() as s:
        s.file("/robots.txt", "text/plain", b"User-agent: *\nDisallow: /private/\n")
        s.html("/derailleur", page("Derailleur adjustment", "<p>Turn the barrel adjuster a quarter turn until "
                                   "the chain shifts cleanly onto every cog.</p>"))
        s.html("/brakes", page("Brake pads", "<p>Replace the pads when the groove is worn away.</p>"))
        s.html("/tyres", page("Tyre pressure", "<p>Road tyres run at six to eight bar.</p>"))
        s.redirect("/old-tyres", "/tyres")
        s.html("/gone", page("Winter storage", "<p>Hang the bike in a dry room over winter.</p>"))
        s.html("/private/secret", page("Staff discounts", "<p>Staff get forty percent off.</p>"))
        locs = "".join(f"<url><loc>{s.base}{p}</loc></url>"
                       for p in ("/derailleur", "/brakes", "/old-tyres", "/gone", "/private/secret"))
        s.file("/sitemap.xml", "application/xml",
               f'<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{locs}</urlset>'
               .encode())
        yield s


def articles(source) -> dict[str, Article]:
    return {a.title: a for a in Article.objects.filter(origin=source)}


def test_a_sitemap_sync_then_a_resync_give_exactly_the_right_articles(site):
    tenant = make_tenant().tenant
    source = sources.source_create(tenant=tenant, kind="website", name="Help", url=site.base + "/sitemap.xml",
                                   delay_ms=0)
    source = run_sync(source)

    assert source.status == "synced", source.error
    first = articles(source)
    assert set(first) == {"Derailleur adjustment", "Brake pads", "Tyre pressure", "Winter storage"}
    assert first["Tyre pressure"].locator == site.base + "/tyres"  # the redirect's target
    assert site.hits["/private/secret"] == 0  # robots.txt
    assert (source.found, source.fetched, source.changed, source.failed) == (4, 4, 4, 0)
    assert all(a.status == "indexed" and a.chunk_count >= 1 for a in first.values())

    site.html("/brakes", page("Brake pads", "<p>Replace the pads when the groove is worn away, and bed "
                              "them in with ten firm stops.</p>"))
    site.remove("/gone")
    source = sources.source_sync_request(source=source)
    source = run_sync(source)

    assert source.status == "synced", source.error
    second = articles(source)
    assert set(second) == {"Derailleur adjustment", "Brake pads", "Tyre pressure"}
    assert "ten firm stops" in " ".join(Chunk.objects.filter(article=second["Brake pads"]).values_list("text", flat=True))
    # Unchanged pages answered 304: their articles were not indexed again.
    assert second["Derailleur adjustment"].indexed_at == first["Derailleur adjustment"].indexed_at
    assert second["Tyre pressure"].indexed_at == first["Tyre pressure"].indexed_at
    assert source.changed == 2  # the brakes page re-indexed, the winter page removed
    assert not Chunk.objects.filter(article_id=first["Winter storage"].pk).exists()


def test_a_crawl_follows_links_on_its_host_to_its_depth_and_obeys_robots_txt(site):
    site.html("/", page("Bike help", "<p>Everything about keeping your bike running well.</p>",
                        links=("/derailleur", "/private/secret", "http://example.invalid/elsewhere", "/d1")))
    site.html("/d1", page("Level one", "<p>First level page about saddles.</p>", links=("/d2",)))
    site.html("/d2", page("Level two", "<p>Second level page about pedals.</p>", links=("/d3",)))
    site.html("/d3", page("Level three", "<p>Third level page about grips.</p>"))
    tenant = make_tenant().tenant
    source = sources.source_create(tenant=tenant, kind="website", name="Help", url=site.base + "/",
                                   max_depth=2, delay_ms=0)
    source = run_sync(source)

    assert source.status == "synced", source.error
    assert set(articles(source)) == {"Bike help", "Derailleur adjustment", "Level one", "Level two"}
    assert site.hits["/private/secret"] == 0 and site.hits["/d3"] == 0


def test_a_page_limit_stops_the_crawl(site):
    site.html("/", page("Bike help", "<p>Everything about bikes.</p>", links=("/derailleur", "/brakes", "/tyres")))
    source = sources.source_create(tenant=make_tenant().tenant, kind="website", name="Help", url=site.base + "/",
                                   max_pages=2, delay_ms=0)
    source = run_sync(source)
    assert source.fetched == 2 and Article.objects.filter(origin=source).count() == 2


def test_a_site_on_a_loopback_address_is_refused_unless_the_operator_allows_it(site, settings):
    settings.TANDEM_OUTBOUND_ALLOW_HOSTS = []
    source = sources.source_create(tenant=make_tenant().tenant, kind="website", name="Help",
                                   url=site.base + "/derailleur", delay_ms=0)
    source = run_sync(source)
    assert source.status == "failed" and "loopback" in source.error
    assert sum(site.hits.values()) == 0
    assert not Article.objects.filter(origin=source).exists()


def test_sources_and_their_articles_belong_to_one_tenant(site):
    mine, other = make_tenant().tenant, make_tenant().tenant
    source = run_sync(sources.source_create(tenant=mine, kind="website", name="Help",
                                            url=site.base + "/sitemap.xml", delay_ms=0))
    assert Article.objects.filter(origin=source, tenant=mine).count() == 4
    assert not Article.objects.filter(tenant=other).exists()
    assert not Chunk.objects.filter(tenant=other).exists()
    assert not Source.objects.filter(tenant=other).exists()


def test_a_due_source_is_queued_by_the_schedule_and_a_stalled_sync_is_started_again(site):
    from datetime import timedelta

    from django.utils import timezone

    tenant = make_tenant().tenant
    source = run_sync(sources.source_create(tenant=tenant, kind="website", name="Help",
                                            url=site.base + "/sitemap.xml", delay_ms=0, sync_every_hours=6))
    assert source.next_sync_at - source.last_synced_at == timedelta(hours=6)
    assert sources.sources_start_due() == 0  # not due yet
    Source.objects.filter(pk=source.pk).update(next_sync_at=timezone.now() - timedelta(minutes=1))
    assert sources.sources_start_due() == 1
    source.refresh_from_db()
    assert source.status == "queued"
    run = source.run
    Source.objects.filter(pk=source.pk).update(progressed_at=timezone.now() - sources.STALLED_AFTER * 2)
    assert sources.sources_start_due() == 1
    source.refresh_from_db()
    assert source.status == "queued" and source.run != run  # a new run: the lost chain's steps stop
    assert run_sync(source).status == "synced"
