"""Tenant → Assistant (the widget's settings, identity verification, hand-over, the
preview) and Tenant → Knowledge (articles, import, indexing state, retrieval settings)."""

from __future__ import annotations

import io
import json
import re
import zipfile

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from knowledge import services as knowledge_services
from knowledge.models import Article, KnowledgeSettings
from tenants.models import AuditLog, Tenant
from tests.console.test_pages import assistant_form, labels

pytestmark = pytest.mark.django_db

A = "/console/t/alpha"


# -- Assistant ----------------------------------------------------------------------------


def test_the_assistant_page_saves_the_widget_and_hand_over_settings_audited(client, world):
    client.force_login(world.admin_a)
    html = client.get(f"{A}/assistant/").content.decode()
    for label in ("System prompt", "Title", "Colour", "Greeting", "Placeholder", "Position", "Language",
                  "Identity verification", "Hand-over phrases", "Hand-over message", "Assign round-robin",
                  "Hand over when the knowledge has no answer"):
        assert label in labels(html), label
    assert re.search(r'<button type="submit">Save</button>', html)
    form = assistant_form(world.a.tenant, widget_title="Alpha help", widget_color="#AA3300",
                          widget_greeting="Hello from Alpha!", widget_placeholder="Ask Alpha",
                          widget_position="left", widget_locale="fr",
                          handover_builtin=False, handover_patterns=r"\bhuman please\b",
                          handover_text="A person is coming.",
                          handover_round_robin=True, handover_ungrounded=True)
    assert client.post(f"{A}/assistant/", form).status_code == 302
    t = Tenant.objects.get(pk=world.a.tenant.pk)
    assert (t.widget_title, t.widget_color, t.widget_greeting, t.widget_placeholder, t.widget_position,
            t.widget_locale, t.handover_patterns, t.handover_text) == (
        "Alpha help", "#aa3300", "Hello from Alpha!", "Ask Alpha", "left", "fr", r"\bhuman please\b",
        "A person is coming.")
    entry = AuditLog.objects.filter(tenant=t, entity="tenant", action="update").latest("pk")
    assert entry.source == "console" and entry.actor == world.admin_a
    assert entry.changes["widget_color"] == ["#2f5bd3", "#aa3300"] and "widget_title" in entry.changes
    assert t.handover_round_robin and t.handover_ungrounded
    assert entry.changes["handover_ungrounded"] == [False, True]


@pytest.mark.parametrize("field,value,message", [
    ("widget_color", "red", "#rrggbb"),
    ("handover_patterns", "ok\n(unclosed", "Line 2"),
    ("handover_patterns", "a{2,1}", "Line 1"),
    ("handover_patterns", "x" * 301, "longer than 300"),
    ("widget_position", "top", "Select a valid choice"),
])
def test_a_bad_assistant_value_is_a_message_beside_its_field(client, world, field, value, message):
    client.force_login(world.admin_a)
    response = client.post(f"{A}/assistant/", assistant_form(world.a.tenant, **{field: value}))
    assert response.status_code == 400
    html = response.content.decode()
    assert 'class="errorlist"' in html and message in html
    assert getattr(Tenant.objects.get(pk=world.a.tenant.pk), field) != value


def test_turning_identity_verification_on_shows_a_new_secret_once_and_rotating_makes_another(client, world):
    client.force_login(world.owner_a)
    assert "No secret yet" in client.get(f"{A}/assistant/").content.decode()
    on = client.post(f"{A}/assistant/", assistant_form(world.a.tenant, identity_verification=True))
    assert on.status_code == 201
    secret = Tenant.objects.get(pk=world.a.tenant.pk).identity_secret
    assert secret and secret in on.content.decode()
    page = client.get(f"{A}/assistant/").content.decode()
    assert "A secret exists" in page and secret not in page  # shown once
    rotated = client.post(f"{A}/assistant/identity-secret/rotate/")
    assert rotated.status_code == 201
    new = Tenant.objects.get(pk=world.a.tenant.pk).identity_secret
    assert new != secret and new in rotated.content.decode()
    entry = AuditLog.objects.filter(tenant=world.a.tenant, action="rotate").get()
    assert new not in json.dumps(entry.changes) and new not in entry.summary


def test_viewers_read_the_assistant_settings_and_cannot_save_or_rotate(client, world):
    client.force_login(world.viewer_a)
    html = client.get(f"{A}/assistant/").content.decode()
    assert "Rotate identity secret" not in html and 'id="assistant-form"' not in html
    assert 'title="Widget preview"' in html
    assert client.post(f"{A}/assistant/", assistant_form(world.a.tenant, widget_title="x")).status_code == 403
    assert client.post(f"{A}/assistant/identity-secret/rotate/").status_code == 403


def test_the_preview_page_embeds_the_real_widget_with_the_unsaved_values_and_no_key(client, world):
    client.force_login(world.admin_a)
    response = client.get(f"{A}/assistant/preview/", {"widget_title": "Unsaved title", "widget_color": "#000000",
                                                      "widget_position": "left", "widget_color_x": "1"})
    assert response.status_code == 200
    assert response["X-Frame-Options"] == "SAMEORIGIN"
    html = response.content.decode()
    assert "/static/tandem/widget.js" in html and "console/widget-preview.js" in html
    assert html.index("widget-preview.js") < html.index("tandem/widget.js")  # the stand-ins come first
    config = json.loads(re.search(r'<script id="preview-config" type="application/json">(.*?)</script>',
                                  html, re.S).group(1))
    assert config["title"] == "Unsaved title" and config["color"] == "#000000" and config["position"] == "left"
    assert config["text_color"] == "#ffffff"
    # The widget's own strings come with the configuration: the browser's language here.
    assert config["i18n"]["locale"] == "en" and config["i18n"]["strings"]["send"] == "Send"
    french = client.get(f"{A}/assistant/preview/", headers={"Accept-Language": "de-CH;q=0.4, fr-FR, en;q=0.8"})
    strings = json.loads(re.search(r'<script id="preview-config" type="application/json">(.*?)</script>',
                                   french.content.decode(), re.S).group(1))["i18n"]
    assert strings["locale"] == "fr" and strings["strings"]["send"] == "Envoyer"
    assert "Bonjour ! Quel est le d" in french.content.decode()  # the sample exchange in it too
    # The unsaved language setting wins over the browser's, as on a site.
    english = client.get(f"{A}/assistant/preview/", {"widget_locale": "en"}, headers={"Accept-Language": "fr"})
    assert '"send": "Send"' in english.content.decode()
    for key in world.a.tenant.api_keys.all():  # no real key in the page: nothing can reach the quota
        assert key.prefix not in html
    bad = client.get(f"{A}/assistant/preview/", {"widget_color": "not-a-colour"})
    assert bad.status_code == 200 and '"color": "#2f5bd3"' in bad.content.decode()  # the saved one


# -- Knowledge ----------------------------------------------------------------------------


def _article(tenant, title="Returns", body="Send it back within 30 days.", **kw):
    return knowledge_services.article_create(tenant=tenant, title=title, body=body, **kw)


def test_the_knowledge_page_lists_searches_and_polls_while_indexing(client, world):
    a = _article(world.a.tenant, url="https://alpha.example/returns", tags=["orders"])
    _article(world.a.tenant, title="Shipping times", body="Three to five days.")
    _article(world.b.tenant, title="Bravo secret article")
    client.force_login(world.viewer_a)
    html = client.get(f"{A}/knowledge/").content.decode()
    assert "Returns" in html and "Shipping times" in html and "Bravo secret article" not in html
    assert "https://alpha.example/returns" in html and "orders" in html and "pending" in html
    assert 'hx-trigger="every 2s"' in html
    assert "Search" in labels(html)
    found = client.get(f"{A}/knowledge/", {"q": "five days"}).content.decode()
    assert "Shipping times" in found and ">Returns<" not in found
    for article in Article.objects.filter(tenant=world.a.tenant):
        knowledge_services.article_index(article_id=article.pk)  # what the Celery task runs
    rows = client.get(f"{A}/knowledge/rows/").content.decode()
    assert "indexed" in rows and "hx-trigger" not in rows
    a.refresh_from_db()
    assert a.status == "indexed" and f">{a.chunk_count}<" in rows


def test_an_admin_creates_edits_and_deletes_an_article_with_errors_beside_fields(client, world):
    client.force_login(world.admin_a)
    new = client.get(f"{A}/knowledge/new/").content.decode()
    assert {"Title", "URL", "Tags", "Body"} <= set(labels(new))
    bad = client.post(f"{A}/knowledge/new/", {"title": "Refunds", "body": "x", "url": "ftp://nope", "tags": ""})
    assert bad.status_code == 400 and "url must be an http(s) URL" in bad.content.decode()
    ok = client.post(f"{A}/knowledge/new/", {"title": "Refunds", "body": "Refunds take a week.",
                                             "url": "https://alpha.example/refunds", "tags": "billing, refunds"})
    assert ok.status_code == 302
    article = Article.objects.get(tenant=world.a.tenant, title="Refunds")
    assert article.tags == ["billing", "refunds"] and article.status == "pending"
    edit = client.post(f"{A}/knowledge/{article.pk}/", {"title": "Refunds policy", "body": "Refunds take a week.",
                                                        "url": "", "tags": "billing"})
    assert edit.status_code == 302
    article.refresh_from_db()
    assert (article.title, article.url, article.tags) == ("Refunds policy", "", ["billing"])
    assert client.post(f"{A}/knowledge/{article.pk}/delete/").status_code == 302
    assert not Article.objects.filter(pk=article.pk).exists()


def test_a_jsonl_or_zip_upload_imports_and_a_bad_file_is_an_error_on_the_form(client, world):
    client.force_login(world.owner_a)
    lines = "\n".join(json.dumps({"title": f"Article {i}", "body": f"Body {i}.", "source": f"s{i}"}) for i in range(3))
    up = SimpleUploadedFile("help.jsonl", lines.encode())
    assert client.post(f"{A}/knowledge/import/", {"file": up}).status_code == 302
    assert Article.objects.filter(tenant=world.a.tenant).count() == 3
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("faq/returns.md", "# Returns\n\nWithin 30 days.")
    zipped = SimpleUploadedFile("help.zip", buf.getvalue())
    assert client.post(f"{A}/knowledge/import/", {"file": zipped}).status_code == 302
    assert Article.objects.filter(tenant=world.a.tenant, title="Returns").exists()
    for name, data, message in [("bad.jsonl", b'{"title": "x"}\nnot json', "not valid JSON"),
                                ("bad.zip", b"PK nope", "not a readable zip"),
                                ("notes.pdf", b"%PDF", ".jsonl or a .zip"),
                                ("empty.jsonl", b"", "file is empty"), ("blank.jsonl", b"\n\n", "no articles")]:
        response = client.post(f"{A}/knowledge/import/", {"file": SimpleUploadedFile(name, data)})
        assert response.status_code == 400, name
        assert message in response.content.decode() and 'class="errorlist"' in response.content.decode(), name
    assert Article.objects.filter(tenant=world.a.tenant).count() == 4


def test_retrieval_settings_save_and_bad_values_are_messages(client, world):
    client.force_login(world.admin_a)
    html = client.get(f"{A}/knowledge/").content.decode()
    assert {"Retrieval on", "Passages per message (k)", "Minimum score", "File"} <= set(labels(html))
    assert client.post(f"{A}/knowledge/settings/", {"top_k": "5", "min_score": "0.2"}).status_code == 302
    s = KnowledgeSettings.objects.get(tenant=world.a.tenant)
    assert (s.enabled, s.top_k, s.min_score) == (False, 5, 0.2)
    bad = client.post(f"{A}/knowledge/settings/", {"enabled": "on", "top_k": "99", "min_score": "2"})
    assert bad.status_code == 400 and bad.content.decode().count('class="errorlist"') >= 2
    assert KnowledgeSettings.objects.get(tenant=world.a.tenant).top_k == 5


def test_viewers_read_articles_but_every_knowledge_write_is_refused(client, world):
    article = _article(world.a.tenant)
    client.force_login(world.viewer_a)
    page = client.get(f"{A}/knowledge/").content.decode()
    assert "New article" not in page and ">Delete<" not in page and "Import" not in page
    assert "Send it back" in client.get(f"{A}/knowledge/{article.pk}/").content.decode()
    assert client.get(f"{A}/knowledge/new/").status_code == 403
    for url in (f"{A}/knowledge/new/", f"{A}/knowledge/{article.pk}/", f"{A}/knowledge/{article.pk}/delete/",
                f"{A}/knowledge/import/", f"{A}/knowledge/settings/"):
        assert client.post(url, {"title": "x", "body": "y", "top_k": "1", "min_score": "0"}).status_code == 403, url
    assert Article.objects.filter(pk=article.pk, title="Returns").exists()


def test_staff_reach_any_tenants_knowledge(client, world):
    article = _article(world.b.tenant, title="Bravo FAQ")
    client.force_login(world.staff)
    assert "Bravo FAQ" in client.get("/console/t/bravo/knowledge/").content.decode()
    assert client.post(f"/console/t/bravo/knowledge/{article.pk}/delete/").status_code == 302
