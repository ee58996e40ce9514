"""The knowledge REST endpoints, in-process (Django's test client): secret-key auth, the
article JSON, another tenant's id answered like a missing one, bulk import, settings, and
bad input answered 400 with the field named (never a 500)."""

from __future__ import annotations

import io
import json
import uuid
import zipfile

import pytest
from django.test import Client

from inference.wire.connections import get_redis
from knowledge import services
from knowledge.models import Article, KnowledgeSettings
from tests.factories import make_tenant

pytestmark = pytest.mark.django_db
BASE = "/api/v1/knowledge/articles/"


@pytest.fixture
def tenant():
    return make_tenant()


def client_for(t) -> Client:
    return Client(headers={"Authorization": f"Bearer {t.secret_key.plaintext}"})


def post(c, path, body):
    return c.post(path, data=json.dumps(body), content_type="application/json")


def patch(c, path, body):
    return c.patch(path, data=json.dumps(body), content_type="application/json")


def assert_400(resp, param):
    assert resp.status_code == 400, resp.content
    error = resp.json()["error"]
    assert error["param"] == param, error
    assert set(error) == {"message", "type", "param", "code"}
    return error


def zip_of(files: dict[str, str | bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, content in files.items():
            z.writestr(name, content)
    return buf.getvalue()


def upload(c, name: str, data: bytes):
    return c.post(BASE + "import/", data={"file": _named(name, data)})


def _named(name, data):
    f = io.BytesIO(data)
    f.name = name
    return f


def test_an_article_is_created_pending_read_back_and_listed(tenant):
    c = client_for(tenant)
    resp = post(c, BASE, {"title": "Shipping costs", "body": "# Costs\n\nFree over 50 euros.",
                          "url": "https://help.example.test/shipping", "tags": ["shipping"]})
    assert resp.status_code == 201, resp.content
    created = resp.json()
    assert created["status"] == "pending" and created["chunks"] == 0 and created["object"] == "knowledge.article"
    assert {"id", "title", "url", "status", "chunks"} <= set(created)
    services.article_index(article_id=created["id"])  # what the CPU worker's task runs
    detail = c.get(f"{BASE}{created['id']}/").json()
    assert (detail["status"], detail["chunks"], detail["body"]) == ("indexed", 1, "# Costs\n\nFree over 50 euros.")
    listed = c.get(BASE + "?limit=1").json()
    assert [a["id"] for a in listed["data"]] == [created["id"]] and listed["has_more"] is False
    assert "body" not in listed["data"][0]


def test_creating_an_article_queues_its_indexing_on_the_cpu_queue_at_the_lowest_priority(tenant, django_capture_on_commit_callbacks):
    client = get_redis()
    before = client.llen("cpu:9")
    with django_capture_on_commit_callbacks(execute=True):
        resp = post(client_for(tenant), BASE, {"title": "T", "body": "Body"})
    assert client.llen("cpu:9") == before + 1
    message = json.loads(client.lindex("cpu:9", 0))
    assert message["headers"]["task"] == "knowledge.index_article"
    assert message["headers"]["argsrepr"] == repr([resp.json()["id"]])
    client.lpop("cpu:9")


def test_editing_the_body_reindexes_and_deleting_removes_the_article(tenant):
    c = client_for(tenant)
    article = services.article_create(tenant=tenant.tenant, title="Hours", body="Open at nine.")
    services.article_index(article_id=article.pk)
    resp = patch(c, f"{BASE}{article.pk}/", {"body": "Open at ten."})
    assert resp.status_code == 200 and resp.json()["status"] == "pending"
    assert patch(c, f"{BASE}{article.pk}/", {"tags": ["hours"]}).json()["tags"] == ["hours"]
    assert c.delete(f"{BASE}{article.pk}/").status_code == 204
    assert c.get(f"{BASE}{article.pk}/").status_code == 404
    assert not Article.objects.filter(pk=article.pk).exists()


def test_another_tenants_article_is_answered_exactly_like_a_missing_one(tenant):
    other = make_tenant()
    theirs = services.article_create(tenant=other.tenant, title="Secret", body="Theirs.")
    c = client_for(tenant)
    for method in (c.get, c.delete):
        mine, missing = method(f"{BASE}{theirs.pk}/"), method(f"{BASE}{uuid.uuid4()}/")
        assert mine.status_code == missing.status_code == 404
        assert mine.json() == missing.json()
    assert patch(c, f"{BASE}{theirs.pk}/", {"title": "x"}).status_code == 404
    assert c.get(BASE).json()["data"] == []
    assert Article.objects.get(pk=theirs.pk).title == "Secret"


def test_a_missing_or_wrong_key_is_a_401():
    assert Client().get(BASE).status_code == 401
    widget = make_tenant().widget_key.plaintext
    assert Client(headers={"Authorization": f"Bearer {widget}"}).get(BASE).status_code == 401


@pytest.mark.parametrize("body,param", [
    ({"title": "T", "body": ""}, "body"),
    ({"title": "T", "body": "   \n "}, "body"),
    ({"title": "T", "body": "x" * (services.MAX_BODY_CHARS + 1)}, "body"),
    ({"title": "T", "body": "<p>hi</p><script>alert(1)</script>", "format": "html"}, "body"),
    ({"title": "T", "body": "<p onmouseover='x()'>hi</p>", "format": "html"}, "body"),
    ({"title": "T", "body": "<div><style>p{}</style></div>", "format": "html"}, "body"),
    ({"title": "", "body": "b"}, "title"),
    ({"title": "T" * 301, "body": "b"}, "title"),
    ({"body": "b"}, "title"),
    ({"title": "T", "body": "b", "format": "pdf"}, "format"),
    ({"title": "T", "body": "b", "url": "ftp://x.example"}, "url"),
    ({"title": "T", "body": "b", "url": "not a url"}, "url"),
    ({"title": "T", "body": "b", "tags": "shipping"}, "tags"),
    ({"title": "T", "body": "b", "tags": ["x" * 51]}, "tags"),
    ({"title": ["T"], "body": "b"}, "title"),
])
def test_bad_article_input_is_a_400_naming_the_field(tenant, body, param):
    assert_400(post(client_for(tenant), BASE, body), param)
    assert not Article.objects.exists()


def test_nul_and_surrogate_characters_are_400s_over_json_and_dropped_from_imports(tenant):
    c = client_for(tenant)
    assert_400(post(c, BASE, {"title": "A\u0000B", "body": "x"}), "title")
    assert_400(post(c, BASE, {"title": "T", "body": "x\udfff z"}), "body")
    # An import's records do not pass through the API's field checks: the service drops NULs.
    lines = json.dumps({"title": "N\u0000UL", "body": "a\u0000b\ud800"}).encode()
    assert upload(c, "x.jsonl", lines).status_code == 201
    assert Article.objects.filter(title="NUL", body="ab").exists()


def test_bad_edits_are_400s_naming_the_field(tenant):
    c = client_for(tenant)
    article = services.article_create(tenant=tenant.tenant, title="T", body="b")
    assert_400(patch(c, f"{BASE}{article.pk}/", {"body": ""}), "body")
    assert_400(patch(c, f"{BASE}{article.pk}/", {"status": "indexed"}), "status")
    assert_400(patch(c, f"{BASE}{article.pk}/", {"format": "html", "body": "<a href='javascript:x'>a</a>"}), "body")
    assert Article.objects.get(pk=article.pk).body == "b"


def test_a_zip_of_markdown_text_and_html_imports_all_and_again_changes_nothing(tenant):
    c = client_for(tenant)
    files = {
        "billing/refunds.md": "---\ntitle: Refunds\nurl: https://help.example.test/refunds\ntags: billing, money\n---\n"
                              "Refunds take 5 days.",
        "hours.txt": "We open at nine.",
        "faq/returns.html": "<html><head><title>Returns</title></head><body><h2>How</h2><p>Use the form.</p></body></html>",
        "images/logo.png": b"\x89PNG not an article",
        "__MACOSX/._hours.txt": "junk",
    }
    resp = upload(c, "help.zip", zip_of(files))
    assert resp.status_code == 201, resp.content
    body = resp.json()
    assert (body["created"], body["updated"], body["unchanged"]) == (3, 0, 0)
    by_source = {a["source"]: a for a in body["data"]}
    assert by_source["billing/refunds.md"]["title"] == "Refunds"
    assert by_source["billing/refunds.md"]["tags"] == ["billing", "money"]
    assert by_source["faq/returns.html"]["title"] == "Returns"
    assert by_source["hours.txt"]["title"] == "Hours"
    for a in body["data"]:
        services.article_index(article_id=a["id"])
    assert Article.objects.get(source="faq/returns.html").text == "## How\n\nUse the form."
    again = upload(c, "help.zip", zip_of(files)).json()
    assert (again["created"], again["updated"], again["unchanged"]) == (0, 0, 3)
    files["hours.txt"] = "We open at ten."
    changed = upload(c, "help.zip", zip_of(files)).json()
    assert (changed["created"], changed["updated"], changed["unchanged"]) == (0, 1, 2)
    assert Article.objects.filter(tenant=tenant.tenant).count() == 3


def test_a_jsonl_file_imports_one_article_a_line(tenant):
    lines = [{"title": "A", "body": "Alpha", "source": "a"}, {"title": "B", "body": "<p>Beta</p>", "format": "html"}]
    data = "\n".join(json.dumps(x) for x in lines).encode() + b"\n\n"
    resp = upload(client_for(tenant), "help.jsonl", data)
    assert resp.status_code == 201, resp.content
    assert [a["title"] for a in resp.json()["data"]] == ["A", "B"]


@pytest.mark.parametrize("name,data,param", [
    ("help.zip", b"PK\x03\x04 this is not really a zip", "file"),
    ("help.zip", zip_of({"a.png": b"x"}), "file"),
    ("help.zip", zip_of({"a.md": "---\ntitle: A\n---\n"}), "file[a.md].body"),
    ("help.zip", zip_of({"a.html": "<p>x</p><script>steal()</script>"}), "file[a.html].body"),
    ("help.zip", zip_of({"a.txt": b"\xff\xfe not utf-8"}), "file[a.txt]"),
    ("help.jsonl", b'{"title": "A", "body": "x"}\n{not json\n', "file[1]"),
    ("help.jsonl", b'{"title": "A", "body": ""}\n', "file[0].body"),
    ("help.jsonl", b'{"title": "A", "body": "x", "colour": "red"}\n', "file[0].colour"),
    ("help.jsonl", b'[1, 2]\n', "file[0]"),
    ("help.jsonl", b"\n\n", "file"),
    ("help.pdf", b"%PDF-1.4", "file"),
])
def test_a_bad_import_is_a_400_naming_the_file_or_record_and_stores_nothing(tenant, name, data, param):
    assert_400(upload(client_for(tenant), name, data), param)
    assert not Article.objects.exists()


def test_a_zip_whose_member_is_corrupt_is_a_400(tenant):
    data = bytearray(zip_of({"a.md": "# A\n\n" + "refunds " * 200}))
    start = data.index(b"refunds")
    data[start:start + 7] = b"XXXXXXX"  # the stored bytes no longer match their CRC
    assert_400(upload(client_for(tenant), "help.zip", bytes(data)), "file[a.md]")


def test_an_import_without_a_file_is_a_400(tenant):
    c = client_for(tenant)
    assert_400(c.post(BASE + "import/", data={"other": "x"}), "file")
    assert_400(post(c, BASE + "import/", {"file": "x"}), "file")


def test_settings_are_read_and_changed_and_bad_values_are_400s(tenant):
    c = client_for(tenant)
    assert c.get("/api/v1/knowledge/settings/").json() == {
        "object": "knowledge.settings", "enabled": True, "top_k": 3, "min_score": 0.2, "language": "english",
        "mode": "hybrid"}
    resp = patch(c, "/api/v1/knowledge/settings/", {"enabled": False, "top_k": 5, "min_score": 0.2})
    assert resp.status_code == 200 and resp.json()["enabled"] is False
    stored = KnowledgeSettings.objects.get(tenant=tenant.tenant)
    assert (stored.enabled, stored.top_k, stored.min_score) == (False, 5, 0.2)
    for body, param in [({"top_k": 0}, "top_k"), ({"top_k": 99}, "top_k"), ({"min_score": 2}, "min_score"),
                        ({"language": "klingon"}, "language"), ({"enabled": "maybe"}, "enabled"),
                        ({"colour": "red"}, "colour")]:
        assert_400(patch(c, "/api/v1/knowledge/settings/", body), param)
