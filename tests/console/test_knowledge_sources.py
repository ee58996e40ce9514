"""Tenant → Knowledge → Sources in the console: in-process pages (the list, adding a
website or a files source, the settings, errors beside their fields, viewers reading
only), and once in Chromium on the running platform, where a PDF uploaded in the page
is synced by the CPU worker while the status panel updates by itself."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from knowledge import sources
from knowledge.models import Source
from tests.console.conftest import PASSWORD, user
from tests.factories import make_tenant
from tests.knowledge.documents import pdf

A = "/console/t/alpha/knowledge/sources/"
WEBSITE = {"name": "Help centre", "url": "https://help.example.com/sitemap.xml", "max_pages": 100, "max_depth": 2,
           "delay_ms": 500, "sync_every_hours": 24}


@pytest.mark.django_db
def test_an_admin_adds_a_website_and_its_page_shows_the_sync_queued_and_polling(client, world):
    client.force_login(world.admin_a)
    assert "No sources yet" in client.get(A).content.decode()
    resp = client.post(A + "website/", WEBSITE)
    assert resp.status_code == 302
    source = Source.objects.get(tenant=world.a.tenant)
    assert (source.kind, source.url, source.max_pages, source.status) == ("website", WEBSITE["url"], 100, "queued")
    html = client.get(resp["Location"]).content.decode()
    assert "Sync now" in html and 'hx-trigger="every 2s"' in html and 'data-count="fetched"' in html
    listing = client.get(A).content.decode()
    assert "Help centre" in listing and 'data-running="true"' in listing


@pytest.mark.django_db
def test_a_bad_website_setting_is_a_message_beside_its_field(client, world):
    client.force_login(world.admin_a)
    resp = client.post(A + "website/", {**WEBSITE, "max_pages": 0, "url": "not a url"})
    assert resp.status_code == 400
    html = resp.content.decode()
    assert "Enter a valid URL" in html and "greater than or equal to 1" in html
    assert not Source.objects.exists()


@pytest.mark.django_db
def test_a_file_of_the_wrong_type_is_refused_beside_the_file_field(client, world):
    client.force_login(world.admin_a)
    source = sources.source_create(tenant=world.a.tenant, kind="files", name="Manuals")
    resp = client.post(f"{A}{source.pk}/files/", {"file": SimpleUploadedFile("setup.exe", b"MZ")})
    assert resp.status_code == 400 and "upload a PDF, DOCX" in resp.content.decode()
    assert not source.files.exists()


@pytest.mark.django_db
def test_a_viewer_reads_the_sources_but_cannot_change_or_sync_them(client, world):
    source = sources.source_create(tenant=world.a.tenant, kind="files", name="Manuals")
    client.force_login(world.viewer_a)
    html = client.get(f"{A}{source.pk}/").content.decode()
    assert "Manuals" in html and "Sync now" not in html
    assert client.post(f"{A}{source.pk}/sync/").status_code == 403
    assert client.post(A + "website/", WEBSITE).status_code == 403


@pytest.mark.django_db
def test_another_tenants_source_is_a_404(client, world):
    theirs = sources.source_create(tenant=world.b.tenant, kind="files", name="Bravo files")
    client.force_login(world.owner_a)
    assert client.get(f"{A}{theirs.pk}/").status_code == 404
    assert client.post(f"{A}{theirs.pk}/sync/").status_code == 404


@pytest.mark.django_db(transaction=True)
def test_in_chromium_an_uploaded_pdf_syncs_and_the_panel_shows_it_without_a_reload(platform, browser, tmp_path):
    from playwright.sync_api import expect

    from knowledge.models import Article
    from tenants.models import Membership

    tenant = make_tenant(slug="kb-browser").tenant
    owner = user()
    Membership.objects.create(tenant=tenant, user=owner, role="owner")
    context = browser.new_context(viewport={"width": 1280, "height": 1000})
    context.set_default_timeout(30_000)
    page = context.new_page()
    page.goto(f"{platform.base_url}/console/login/")
    page.get_by_label("Username").fill(owner.username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.goto(f"{platform.base_url}/console/t/{tenant.slug}/knowledge/")
    page.get_by_role("link", name="Sources", exact=True).click()
    form = page.get_by_role("form", name="Add a files source")
    form.get_by_label("Name").fill("Manuals")
    form.get_by_role("button", name="Add").click()
    upload = tmp_path / "Warranty.pdf"
    upload.write_bytes(pdf(["Frames carry a lifetime warranty.", "Hubs are covered for two years."]))
    page.get_by_label("File", exact=True).set_input_files(str(upload))
    page.get_by_role("button", name="Upload").click()
    panel = page.locator("#source-status")
    expect(panel.locator(".badge")).to_have_text("synced", timeout=90_000)  # polled in, no reload
    expect(panel.locator('[data-count="changed"]')).to_have_text("1")
    page.reload()
    expect(page.get_by_role("link", name="Warranty.pdf")).to_be_visible()
    shots = Path(os.environ.get("TANDEM_CONSOLE_SCREENSHOTS", tmp_path))
    shots.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(shots / "knowledge-source.png"), full_page=True)
    page.goto(f"{platform.base_url}/console/t/{tenant.slug}/knowledge/sources/")
    expect(page.get_by_role("link", name="Manuals")).to_be_visible()
    page.screenshot(path=str(shots / "knowledge-sources.png"), full_page=True)
    context.close()
    assert Article.objects.get(origin__tenant=tenant).status == "indexed"


@pytest.mark.django_db
def test_a_synced_websites_page_lists_its_articles_and_the_pages_that_failed(client, world, settings):
    from tests.knowledge.conftest import run_sync
    from tests.knowledge.site import Site, page

    settings.TANDEM_OUTBOUND_ALLOW_HOSTS = ["127.0.0.1"]
    with Site() as site:
        site.html("/", page("Bike help", "<p>Everything about bikes.</p>", links=("/brakes", "/broken")))
        site.html("/brakes", page("Brake pads", "<p>Replace the pads when the groove is worn away.</p>"))
        site.file("/broken", "text/html", b"oops", status=500)
        source = run_sync(sources.source_create(tenant=world.a.tenant, kind="website", name="Bike help",
                                                url=site.base + "/", delay_ms=0))
    client.force_login(world.viewer_a)
    html = client.get(f"{A}{source.pk}/").content.decode()
    assert "Brake pads" in html and "Pages that failed" in html and f"{site.base}/broken" in html
    assert 'data-count="failed">1<' in html and 'data-running="false"' in html
