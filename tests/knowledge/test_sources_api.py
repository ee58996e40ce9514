"""The knowledge-source endpoints: in-process (Django's test client) for the JSON, the
errors (400 naming the field, 404 for another tenant's source, 409 while a sync runs,
never a 500); and once on the running platform, where a file uploaded over REST is
parsed and indexed by the CPU worker's Celery sync."""

from __future__ import annotations

import json
import time

import httpx
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from knowledge.models import Article, Source
from tests.factories import make_tenant

from .documents import pdf

BASE = "/api/v1/knowledge/sources/"


def client_for(t) -> Client:
    return Client(headers={"Authorization": f"Bearer {t.secret_key.plaintext}"})


def post(c, path, body):
    return c.post(path, data=json.dumps(body), content_type="application/json")


@pytest.mark.django_db
def test_a_website_source_is_created_listed_read_changed_and_deleted():
    t = make_tenant()
    c = client_for(t)
    resp = post(c, BASE, {"kind": "website", "name": "Help centre", "url": "https://help.example.com/sitemap.xml",
                          "max_pages": 50, "sync_every_hours": 12})
    assert resp.status_code == 201, resp.content
    created = resp.json()
    assert created["status"] == "queued" and created["articles"] == 0 and created["progress"] == {"found": 0, "fetched": 0, "changed": 0,
                                                                     "failed": 0}
    assert [s["id"] for s in c.get(BASE).json()["data"]] == [created["id"]]
    detail = c.get(f"{BASE}{created['id']}/").json()
    assert detail["articles"] == 0 and detail["errors"] == []
    resp = c.patch(f"{BASE}{created['id']}/", data=json.dumps({"max_depth": 1}), content_type="application/json")
    assert resp.status_code == 200 and resp.json()["max_depth"] == 1
    assert post(c, f"{BASE}{created['id']}/sync/", {}).json()["error"]["code"] == "sync_in_progress"
    assert c.delete(f"{BASE}{created['id']}/").status_code == 204
    assert not Source.objects.filter(pk=created["id"]).exists()


@pytest.mark.django_db
@pytest.mark.parametrize("body,param", [
    ({"kind": "website", "name": "x"}, "url"),
    ({"kind": "website", "name": "x", "url": "ftp://example.com/"}, "url"),
    ({"kind": "feeds", "name": "x"}, "kind"),
    ({"kind": "website", "name": "x", "url": "https://example.com/", "max_pages": 0}, "max_pages"),
    ({"kind": "website", "name": "x", "url": "https://example.com/", "delay_ms": 99_999}, "delay_ms"),
    ({"kind": "files", "name": "x", "url": "https://example.com/"}, "url"),
    ({"kind": "files", "name": "x", "colour": "red"}, "colour"),
])
def test_bad_source_input_is_a_400_naming_the_field(body, param):
    resp = post(client_for(make_tenant()), BASE, body)
    assert resp.status_code == 400, resp.content
    assert resp.json()["error"]["param"] == param


@pytest.mark.django_db
def test_another_tenants_source_is_answered_like_a_missing_one():
    mine, theirs = make_tenant(), make_tenant()
    source = post(client_for(theirs), BASE, {"kind": "files", "name": "Manuals"}).json()
    c = client_for(mine)
    for resp in (c.get(f"{BASE}{source['id']}/"), post(c, f"{BASE}{source['id']}/sync/", {}),
                 c.get(f"{BASE}{source['id']}/files/"), c.delete(f"{BASE}{source['id']}/"),
                 c.get(f"{BASE}not-a-uuid/")):
        assert resp.status_code == 404 and resp.json()["error"]["code"] == "source_not_found"
    assert c.get(BASE).json()["data"] == []


@pytest.mark.django_db
def test_a_file_of_a_type_we_cannot_read_is_a_400_naming_the_file():
    c = client_for(make_tenant())
    source = post(c, BASE, {"kind": "files", "name": "Manuals"}).json()
    resp = c.post(f"{BASE}{source['id']}/files/", data={"file": SimpleUploadedFile("setup.exe", b"MZ")})
    assert resp.status_code == 400 and resp.json()["error"]["param"] == "file"
    assert "upload a PDF, DOCX" in resp.json()["error"]["message"]


@pytest.mark.django_db(transaction=True)
def test_a_pdf_uploaded_over_rest_is_synced_by_the_cpu_worker(platform):
    t = make_tenant()
    headers = {"Authorization": f"Bearer {t.secret_key.plaintext}"}
    with httpx.Client(base_url=platform.base_url, headers=headers, timeout=30) as c:
        source = c.post(BASE, json={"kind": "files", "name": "Manuals"}).json()
        resp = c.post(f"{BASE}{source['id']}/files/",
                      files={"file": ("Warranty.pdf", pdf(["Frames carry a lifetime warranty.",
                                                           "Hubs are covered for two years."]), "application/pdf")})
        assert resp.status_code == 202, resp.text
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            detail = c.get(f"{BASE}{source['id']}/").json()
            if detail["status"] not in ("queued", "syncing"):
                break
            time.sleep(0.2)  # polling the API as a client would, not synchronising with it
        assert detail["status"] == "synced", detail
        assert detail["progress"]["changed"] == 1 and detail["articles"] == 1
    article = Article.objects.get(origin_id=source["id"])
    assert article.title == "Warranty.pdf" and article.status == "indexed" and article.chunk_count == 2
