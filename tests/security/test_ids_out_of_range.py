"""An id past the database's range is a 404 (a missing row), never a 500: every route
with a row id uses the `<id:…>` converter (tandem/url_converters.py), which does not
match such an id. The routes come from the resolver, so a page added later is swept
without editing this test. Ids that come in a query string or a form are checked
case by case below: a 400 or a 404 that says so, never a 500."""

from __future__ import annotations

import re
import uuid

import pytest
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, resolve
from django.urls.converters import IntConverter, SlugConverter, UUIDConverter
from django.urls.exceptions import Resolver404

from knowledge.models import Source
from tandem.url_converters import ID_MAX, IdConverter

pytestmark = pytest.mark.django_db

TOO_BIG = ["99999999999999999999", str(ID_MAX + 1)]  # 20 digits; 19 digits, one past bigint


def routes_with(converter_class) -> list[tuple[str, str, dict]]:
    """(name, route, {parameter: converter}) of every URL pattern with a part of that converter."""
    out = []

    def walk(patterns, prefix: str, converters: dict):
        for p in patterns:
            if isinstance(p, URLResolver):
                walk(p.url_patterns, prefix + str(p.pattern), {**converters, **p.pattern.converters})
            elif isinstance(p, URLPattern):
                found = {**converters, **p.pattern.converters}
                if any(isinstance(c, converter_class) for c in found.values()):
                    out.append((p.name, prefix + str(p.pattern), found))

    walk(get_resolver().url_patterns, "", {})
    return out


def test_no_route_takes_an_unbounded_int():
    assert routes_with(IntConverter) == [], "a row id in a path is <id:…> (tandem/url_converters.py)"


def fill(route: str, converters: dict, values: dict, row_id: str) -> str:
    path = route
    for name, converter in converters.items():
        value = row_id if isinstance(converter, IdConverter) else values[type(converter)](name)
        path = re.sub(rf"<[^<>]*:{name}>", value, path)
    assert "<" not in path, path
    return "/" + path


def test_every_route_with_an_id_out_of_range_is_a_404(world):
    source = Source.objects.create(tenant=world.a.tenant, kind="files", name="A's files")
    plausible = {  # A's tenant and, where the route names one, A's own object
        SlugConverter: lambda name: world.a.tenant.slug,
        UUIDConverter: lambda name: str(source.pk if name == "source_id" else uuid.uuid4()),
    }
    routes = routes_with(IdConverter)
    names = {name for name, _, _ in routes}
    # Not vacuous: the walk sees the console's, the actions' and the evaluations' ids.
    assert len(routes) >= 10, names
    assert {"key_revoke", "member_role", "pool_edit", "invitation_accept", "action", "eval_case", "eval_run",
            "knowledge_source_file_remove", "inbox_label_edit", "saved_reply_delete"} <= names
    owner, operator = Client(), Client()
    owner.force_login(world.owner_a)
    operator.force_login(world.staff)
    swept = 0
    for name, route, converters in routes:
        # The same URL with an id in range resolves to this pattern: only the id is refused.
        assert resolve(fill(route, converters, plausible, "1")).url_name == name
        for row_id in TOO_BIG:
            url = fill(route, converters, plausible, row_id)
            with pytest.raises(Resolver404):
                resolve(url)
            for client in (owner, operator):
                for method in ("get", "post"):
                    status = getattr(client, method)(url).status_code
                    assert status == 404, (name, method, url, status)
                    swept += 1
    assert swept == len(routes) * len(TOO_BIG) * 4


def test_the_converter_keeps_ids_in_range_and_reverses_only_those():
    converter = IdConverter()
    assert converter.to_python("1") == 1
    assert converter.to_python(str(ID_MAX)) == ID_MAX
    for value in ["0", str(ID_MAX + 1)]:
        with pytest.raises(ValueError):
            converter.to_python(value)
        with pytest.raises(ValueError):
            converter.to_url(int(value))
    assert re.fullmatch(converter.regex, "9" * 19) and not re.fullmatch(converter.regex, "9" * 20)


BIG = TOO_BIG[0]


def test_ids_in_query_strings_and_forms_out_of_range_are_said_not_500(client, world):
    """Each id a console page takes from its query or its form, out of range or malformed."""
    client.force_login(world.owner_a)
    t, conv = world.a.tenant.slug, world.conv_a.pk
    cases = [
        ("get", f"/console/t/{t}/inbox/?label={BIG}", None, 400),  # "No such label" over the list
        ("get", f"/console/t/{t}/inbox/rows/?label={BIG}", None, 400),
        ("get", f"/console/t/{t}/approvals/?conversation={BIG}", None, 400),
        ("get", f"/console/t/{t}/approvals/?conversation=not-a-uuid", None, 400),
        ("post", f"/console/t/{t}/inbox/bulk/", {"c": [conv], "action": "label", "label": BIG}, 404),
        ("post", f"/console/t/{t}/inbox/bulk/", {"c": [conv], "action": "assign", "agent": BIG}, 404),
        ("post", f"/console/t/{t}/inbox/bulk/", {"c": [BIG], "action": "resolve"}, 404),
        # Back to the page, with what went wrong said on it.
        ("post", f"/console/t/{t}/inbox/{conv}/labels/", {"label": [BIG]}, 302),
        ("get", f"/console/t/{t}/assistant/evals/compare/?a={BIG}&b={BIG}", None, 302),
        ("get", f"/console/t/{t}/conversations/?page={BIG}", None, 200),  # the last page
        ("get", f"/console/t/{t}/audit/?page={BIG}", None, 200),
    ]
    for method, url, data, expected in cases:
        response = getattr(client, method)(url, data) if data else getattr(client, method)(url)
        assert response.status_code == expected, (method, url, data, response.status_code)
    bad = client.get(f"/console/t/{t}/approvals/?conversation={BIG}")
    assert "conversation must be a conversation's id" in bad.content.decode()


def test_api_ids_out_of_range_are_404s_and_query_numbers_400s(world):
    """The REST API takes its ids as strings (`<str:…>`): an id out of range is the same
    JSON 404 as a missing one, a page size or offset out of range a 400 naming it."""
    api = Client(headers={"Authorization": f"Bearer {world.a.secret_key.plaintext}"})
    source = Source.objects.create(tenant=world.a.tenant, kind="files", name="A's files")
    for method, url in [("get", f"/api/v1/evals/cases/{BIG}/"), ("patch", f"/api/v1/evals/cases/{BIG}/"),
                        ("delete", f"/api/v1/evals/cases/{BIG}/"), ("get", f"/api/v1/evals/runs/{BIG}/"),
                        ("delete", f"/api/v1/knowledge/sources/{source.pk}/files/{BIG}/"),
                        ("get", f"/api/v1/knowledge/sources/{BIG}/"), ("get", f"/api/v1/webhooks/{BIG}/"),
                        ("get", f"/api/v1/conversations/{BIG}/"), ("post", f"/api/v1/messages/{BIG}/feedback/")]:
        body = {"post": {"rating": "up"}, "patch": {"question": "q"}}.get(method)
        response = (getattr(api, method)(url, body, content_type="application/json") if body
                    else getattr(api, method)(url))
        assert response.status_code == 404, (method, url, response.status_code)
        assert response.json()["error"]["code"].endswith("_not_found"), (url, response.json())
    for url, param in [(f"/api/v1/knowledge/articles/?offset={BIG}", "offset"),
                       (f"/api/v1/knowledge/articles/?limit={BIG}", "limit"),
                       (f"/api/v1/conversations/?limit={BIG}", "limit")]:
        response = api.get(url)
        assert response.status_code == 400, (url, response.status_code)
        assert response.json()["error"]["param"] == param
