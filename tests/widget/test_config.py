"""GET /widget/config: the tenant's widget settings for pages of the key's allowed
origins, and how a site owner edits them in the admin."""

from __future__ import annotations

import itertools
import json

import pytest

from tandem.chat.widget import contrast_ratio, text_color_on
from tenants import keys
from tenants.models import Membership, Tenant
from tests.factories import UserFactory, make_tenant

pytestmark = pytest.mark.django_db
SITE = "https://shop.example"


def _config(client, key, **headers):
    return client.get("/widget/config", {"key": key}, headers=headers)


def test_an_allowed_origin_gets_the_tenants_widget_settings_with_cors(client):
    created = make_tenant(origins=[SITE])
    Tenant.objects.filter(pk=created.tenant.pk).update(
        widget_title="Help", widget_color="#ffd400", widget_greeting="Hej!", widget_placeholder="Ask away",
        widget_position="left", widget_locale="fr", identity_verification=True, identity_secret="s3cret")
    response = _config(client, created.widget_key.plaintext, Origin=SITE)
    assert response.status_code == 200
    body = response.json()
    assert {k: body[k] for k in ("title", "color", "text_color", "greeting", "placeholder", "position", "locale",
                                 "identity_verification", "csat_idle_minutes", "agents")} == {
        "title": "Help", "color": "#ffd400", "text_color": "#000000", "greeting": "Hej!",
        "placeholder": "Ask away", "position": "left", "locale": "fr", "identity_verification": True,
        "csat_idle_minutes": 10.0, "agents": False,
    }
    # The tenant's language, with its strings (the bundle carries English only).
    assert body["i18n"]["locale"] == "fr" and body["i18n"]["strings"]["send"] == "Envoyer"
    assert b"s3cret" not in response.content
    assert response["Access-Control-Allow-Origin"] == SITE
    assert response["Vary"] == "Origin"
    assert response["Cache-Control"] == "public, max-age=60"


def test_defaults_name_the_tenant_and_leave_words_to_the_widget(client):
    created = make_tenant(origins=[SITE])
    body = _config(client, created.widget_key.plaintext, Origin=SITE).json()
    assert body["title"] == created.tenant.name
    assert (body["greeting"], body["placeholder"], body["locale"]) == ("", "", None)
    assert body["identity_verification"] is False


def test_an_origin_the_key_does_not_allow_is_refused_readably_and_without_the_tenants_settings(client):
    created = make_tenant(origins=[SITE])
    response = _config(client, created.widget_key.plaintext, Origin="https://evil.example")
    assert response.status_code == 403
    body = response.json()
    assert body["error"] == {"code": "origin_not_allowed",
                             "message": "Origin 'https://evil.example' is not allowed for this key."}
    # The words to say so with, in the page's language (nothing of the tenant's).
    assert set(body) == {"error", "i18n"} and body["i18n"]["locale"] == "en"
    assert "allowed origins" in body["i18n"]["strings"]["originNotAllowed"]
    # The page may read why (to say so in the panel); nothing of the tenant is in it.
    assert response["Access-Control-Allow-Origin"] == "https://evil.example"
    assert created.tenant.name.encode() not in response.content
    assert _config(client, created.widget_key.plaintext).status_code == 403  # no Origin at all


def test_a_page_on_tandems_own_origin_is_recognised_by_sec_fetch_site(client):
    # Browsers send no Origin with a same-origin GET; the demo page is one.
    created = make_tenant(origins=["http://testserver"])
    assert _config(client, created.widget_key.plaintext, **{"Sec-Fetch-Site": "same-origin"}).status_code == 200
    assert _config(client, created.widget_key.plaintext, **{"Sec-Fetch-Site": "cross-site"}).status_code == 403


@pytest.mark.parametrize("which, code", [("unknown", "invalid_api_key"), ("secret", "wrong_key_kind"),
                                         ("inactive", "tenant_inactive")])
def test_a_key_that_does_not_work_is_refused(client, which, code):
    created = make_tenant(origins=[SITE])
    key = {"unknown": "pk_nope", "secret": created.secret_key.plaintext}.get(which, created.widget_key.plaintext)
    if which == "inactive":
        Tenant.objects.filter(pk=created.tenant.pk).update(is_active=False)
    response = _config(client, key, Origin=SITE)
    assert response.status_code == 401
    assert response.json()["error"]["code"] == code
    assert response["Cache-Control"] == "no-store"


def test_the_text_on_any_tenant_colour_passes_wcag_aa():
    steps = ["00", "33", "66", "80", "99", "cc", "ff"]
    for r, g, b in itertools.product(steps, repeat=3):
        colour = f"#{r}{g}{b}"
        assert contrast_ratio(colour, text_color_on(colour)) >= 4.5, colour


def test_the_identity_hash_is_hmac_sha256_of_the_user_id():
    # RFC-style known answer: HMAC-SHA256("key", "The quick brown fox jumps over the lazy dog").
    assert keys.identity_hash("key", "The quick brown fox jumps over the lazy dog") == (
        "f7bc83f430538424b13298e6aa6fb143ef4d59a14946175997479dbc2d1a3cd8")
    assert keys.identity_hash_matches("key", "u1", keys.identity_hash("key", "u1").upper())
    assert not keys.identity_hash_matches("key", "u1", keys.identity_hash("key", "u2"))
    assert not keys.identity_hash_matches("key", "u1", "é" * 64)  # not hex, not a crash
    assert not keys.identity_hash_matches("", "u1", keys.identity_hash("", "u1"))  # no secret, no match


def test_site_owners_edit_the_widget_and_turn_on_identity_verification_in_the_admin(client):
    created = make_tenant(origins=[SITE])
    tenant = created.tenant
    client.force_login(UserFactory(is_staff=True, is_superuser=True))
    url = f"/admin/tenants/tenant/{tenant.pk}/change/"
    page = client.get(url)
    assert page.status_code == 200
    for field in ["widget_title", "widget_color", "widget_greeting", "widget_placeholder", "widget_position",
                  "widget_locale", "identity_verification"]:
        assert f'name="{field}"'.encode() in page.content
    form = {"slug": tenant.slug, "name": tenant.name, "system_prompt": tenant.system_prompt, "is_active": "on",
            "widget_title": "Support", "widget_color": "#123456", "widget_greeting": "Hello!",
            "widget_placeholder": "", "widget_position": "left", "widget_locale": "fr",
            "identity_verification": "on"}
    inlines = {}
    for prefix in ("quota", "allocation"):
        inlines.update({f"{prefix}-TOTAL_FORMS": "0", f"{prefix}-INITIAL_FORMS": "0"})
    response = client.post(url, {**form, **inlines})
    if response.status_code != 302:  # the inline formsets' own fields, as rendered
        pytest.fail(response.content.decode()[:3000])
    tenant.refresh_from_db()
    assert (tenant.widget_title, tenant.widget_color, tenant.widget_position, tenant.widget_locale) == (
        "Support", "#123456", "left", "fr")
    assert tenant.identity_verification and len(tenant.identity_secret) == 64
    assert tenant.identity_secret.encode() in client.get(url).content  # shown to the owner

    old = tenant.identity_secret
    client.post("/admin/tenants/tenant/", {"action": "rotate_identity_secret", "_selected_action": [tenant.pk]})
    tenant.refresh_from_db()
    assert tenant.identity_secret != old and len(tenant.identity_secret) == 64

    response = client.post(url, {**form, "widget_color": "blue", **inlines})
    assert response.status_code == 200 and b"A colour as #rrggbb." in response.content


def _i18n(client, key, **params):
    return client.get("/widget/config", {"key": key, **params}, headers={"Origin": SITE}).json()["i18n"]


def test_the_widget_speaks_the_pages_locale_then_the_tenants_then_the_browsers(client):
    created = make_tenant(origins=[SITE])
    key = created.widget_key.plaintext
    english = _i18n(client, key)
    assert english["locale"] == "en" and english["strings"]["send"] == "Send"
    assert _i18n(client, key, langs="de-AT,fr")["locale"] == "de"
    assert _i18n(client, key, langs="ja,es-419")["locale"] == "es"
    assert _i18n(client, key, locale="fr", langs="de")["locale"] == "fr"
    assert _i18n(client, key, langs="ja,zh")["locale"] == "en"
    Tenant.objects.filter(pk=created.tenant.pk).update(widget_locale="es")
    assert _i18n(client, key, langs="de")["locale"] == "es"  # the tenant's choice before the browser's
    german = _i18n(client, key, locale="de-CH")
    assert german["locale"] == "de" and german["strings"]["person"] == "Mit einer Person sprechen"


def test_every_language_the_server_offers_has_every_string_of_english():
    from pathlib import Path

    from tandem.chat.widget import catalogues

    english = json.loads((Path(__file__).resolve().parents[2] / "widget/src/i18n/en.json").read_text())
    assert {"en", "fr", "de", "es"} <= set(catalogues())
    for lang, strings in catalogues().items():
        assert set(strings) == set(english), lang


def test_the_person_button_shows_for_a_tenant_with_people_who_answer(client):
    created = make_tenant(origins=[SITE])
    key = created.widget_key.plaintext
    assert _config(client, key, Origin=SITE).json()["agents"] is False
    Membership.objects.create(user=UserFactory(), tenant=created.tenant, role=Membership.Role.VIEWER)
    assert _config(client, key, Origin=SITE).json()["agents"] is False  # a viewer answers nobody
    Membership.objects.create(user=UserFactory(), tenant=created.tenant, role=Membership.Role.AGENT)
    assert _config(client, key, Origin=SITE).json()["agents"] is True


def test_a_refusal_speaks_the_pages_language_and_never_the_tenants(client):
    created = make_tenant(origins=[SITE])
    Tenant.objects.filter(pk=created.tenant.pk).update(widget_locale="de")
    body = client.get("/widget/config", {"key": created.widget_key.plaintext, "langs": "fr-FR"},
                      headers={"Origin": "https://evil.example"}).json()
    assert body["i18n"]["locale"] == "fr"  # the browser's; the tenant's German is the tenant's
    unknown = client.get("/widget/config", {"key": "pk_nope", "locale": "es"}, headers={"Origin": SITE}).json()
    assert unknown["error"]["code"] == "invalid_api_key" and unknown["i18n"]["locale"] == "es"
