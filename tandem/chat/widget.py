"""The browser widget's configuration, `GET /widget/config?key=pk_…`: what the tenant set
in the admin (tenants.models.Tenant.widget_*), for pages of the key's allowed origins.

The page's `Origin` is checked as the websocket checks it. A refusal still names the
page's origin in Access-Control-Allow-Origin, so the widget can read why and say so in
its panel; it carries nothing of the tenant.

The widget's strings in the visitor's language come with the configuration (`i18n`),
also with a refusal (so the panel can say why): the bundle carries no catalogue (only
a few English words for when the configuration cannot be fetched at all); they are
static/tandem/widget-i18n.json, built from widget/src/i18n/. The language is the first
supported one of the page's TandemSettings.locale (`locale`), the tenant's widget
locale, and the browser's languages (`langs`, comma-separated, best first)."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from functools import lru_cache

from django.conf import settings

from tandem.attachments.selectors import policy_data, policy_of
from tandem.handoff.assignment import INBOX_ROLES
from tenants.access import access_list
from tenants.models import ApiKey, Membership, Tenant
from tenants.services import AuthenticationFailed, api_key_authenticate, origin_allowed

log = logging.getLogger(__name__)
CONFIG_MAX_AGE_S = 60  # an admin's change reaches pages within a minute
CATALOGUES = settings.BASE_DIR / "static" / "tandem" / "widget-i18n.json"
MAX_LANGS = 8  # of the browser's list, the first this many count


@dataclass(frozen=True)
class WidgetConfigAnswer:
    status: int
    body: dict
    headers: dict = field(default_factory=dict)


def _luminance(hex_color: str) -> float:
    """WCAG relative luminance of #rrggbb."""
    channels = [int(hex_color[i:i + 2], 16) / 255 for i in (1, 3, 5)]
    lin = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]


def contrast_ratio(a: str, b: str) -> float:
    la, lb = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (la + 0.05) / (lb + 0.05)


def text_color_on(background: str) -> str:
    """White or black, whichever contrasts more with `background`: at least 4.5:1 (WCAG
    AA) on any background, since the better of the two never falls below ~4.58."""
    light, dark = "#ffffff", "#000000"
    return light if contrast_ratio(background, light) >= contrast_ratio(background, dark) else dark


@lru_cache(maxsize=1)
def catalogues() -> dict[str, dict[str, str]]:
    """{language: {string id: text}}, English included; every catalogue has every string
    (the widget's build refuses one that does not)."""
    try:
        return json.loads(CATALOGUES.read_text(encoding="utf-8"))
    except FileNotFoundError:  # a checkout without the built file: visitors still get English
        log.error("%s is missing: the widget has only its fallback English (build it: cd widget && npm run build)",
                  CATALOGUES)
        return {}


def widget_language(wanted: list[str]) -> str:
    """The first of `wanted` (tags such as "fr-CA", best first) the widget speaks; English
    when none is."""
    for tag in wanted:
        lang = tag.strip().lower().replace("_", "-").split("-")[0] if isinstance(tag, str) else ""
        if lang in catalogues():
            return lang
    return "en"


def widget_i18n(*, tenant: Tenant | None, locale: str = "", langs: str = "") -> dict:
    """{"locale", "strings"} for the page; a refusal (no tenant) goes by the page alone."""
    lang = widget_language([locale, tenant.widget_locale if tenant else "", *langs.split(",")[:MAX_LANGS]])
    strings = catalogues().get(lang)
    return {"locale": lang, **({"strings": strings} if strings else {})}


def widget_config(*, tenant: Tenant, locale: str = "", langs: str = "") -> dict:
    """The widget's settings; the identity secret never leaves the server."""
    return {
        "title": tenant.widget_title or tenant.name,
        "color": tenant.widget_color,
        "text_color": text_color_on(tenant.widget_color),
        "greeting": tenant.widget_greeting,
        "placeholder": tenant.widget_placeholder,
        "position": tenant.widget_position,
        "locale": tenant.widget_locale or None,
        "identity_verification": tenant.identity_verification,
        # After this many idle minutes the widget asks for CSAT (docs/outcomes.md).
        "csat_idle_minutes": settings.TANDEM_CSAT_IDLE_MINUTES,
        # What the paperclip may send (tandem.attachments; docs/attachments.md).
        "attachments": policy_data(policy_of(tenant=tenant)),
        # The tenant has people who answer (members with the inbox): the widget shows
        # "Talk to a person" as a button. Whether one is online, and the business hours,
        # the hand-over itself says (docs/protocol.md, `handoff`).
        "agents": has_agents(tenant=tenant),
        "i18n": widget_i18n(tenant=tenant, locale=locale, langs=langs),
    }


def has_agents(*, tenant: Tenant) -> bool:
    return access_list(Membership, tenant=tenant).filter(role__in=INBOX_ROLES, user__is_active=True).exists()


def _error(code: str, message: str, i18n: dict) -> dict:
    return {"error": {"code": code, "message": message}, "i18n": i18n}


def page_origin(*, origin: str | None, fetch_site: str | None, own_origin: str) -> str | None:
    """The origin of the page asking. Browsers send `Origin` with cross-origin requests
    but not with a same-origin GET (a page on Tandem's own host, like the demo page);
    that one says `Sec-Fetch-Site: same-origin`, a header no page script can set."""
    if origin:
        return origin
    return own_origin if fetch_site == "same-origin" else None


def widget_config_answer(*, key: str, origin: str | None, locale: str = "", langs: str = "") -> WidgetConfigAnswer:
    """The whole answer to a page asking for its widget's configuration."""
    cors = {"Access-Control-Allow-Origin": origin} if origin else {}
    headers = {**cors, "Vary": "Origin", "Cache-Control": f"public, max-age={CONFIG_MAX_AGE_S}"}
    refusal_i18n = widget_i18n(tenant=None, locale=locale, langs=langs)
    try:
        api_key = api_key_authenticate(plaintext=key, kind=ApiKey.Kind.WIDGET)
    except AuthenticationFailed as exc:
        return WidgetConfigAnswer(401, _error(exc.code, str(exc), refusal_i18n), {**headers, "Cache-Control": "no-store"})
    if not origin_allowed(api_key=api_key, origin=origin):
        return WidgetConfigAnswer(403, _error("origin_not_allowed", f"Origin {origin!r} is not allowed for this key.",
                                              refusal_i18n), headers)
    return WidgetConfigAnswer(200, widget_config(tenant=api_key.tenant, locale=locale, langs=langs), headers)
