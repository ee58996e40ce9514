"""Defining actions: every field a tenant's admin fills is checked, a refusal names its
field (and lands beside it in the console), and the secrets are encrypted at rest and
shown once."""

from __future__ import annotations

import pytest

from tandem.actions import services
from tandem.actions.definitions import ActionInputError
from tandem.actions.models import Action
from tandem.webhooks.crypto import secret_decrypt
from tenants.models import AuditLog, Membership
from tests.console.conftest import user
from tests.factories import make_tenant

pytestmark = pytest.mark.django_db

ORDER = {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]}


def define(tenant, **fields):
    base = {"name": "order_status", "description": "Look up an order by its id.", "parameters": ORDER,
            "method": "GET", "url_template": "https://shop.example.com/orders/{order_id}"}
    return services.action_create(tenant=tenant, by=None, **{**base, **fields})


@pytest.mark.parametrize(("fields", "field", "words"), [
    ({"name": "9lives"}, "name", "letters, digits"),
    ({"url_template": "https://{order_id}.example.com/x"}, "url_template", "scheme and host are fixed"),
    ({"url_template": "https://shop.example.com/{customer}"}, "url_template", "not one of the parameters"),
    ({"url_template": "ftp://shop.example.com/x"}, "url_template", "http(s)"),
    ({"url_template": "http://10.1.2.3/x"}, "url_template", "private"),
    ({"parameters": {"type": "array"}}, "parameters", '"object"'),
    ({"parameters": "{not json"}, "parameters", "Not valid JSON"),
    ({"parameters": {"type": "object", "properties": {"a": {"type": "strin"}}}}, "parameters", "valid JSON schema"),
    ({"parameters": {"type": "object", "properties": {"a": {"type": "string", "pattern": "(a+)+$"}}}},
     "parameters", "pattern"),
    ({"headers": "Host: evil.example"}, "headers", "written by Tandem"),
    ({"headers": "X-Ok value"}, "headers", "Name: value"),
    ({"secret_header_name": "Authorization", "secret_header_value": ""}, "secret_header_value", "value"),
    ({"timeout_s": 60}, "timeout_s", "between 0.5 and 10"),
    ({"who": "everyone"}, "who", "verified, anyone"),
    ({"method": "TRACE"}, "method", "GET"),
])
def test_a_field_that_cannot_be_used_is_refused_by_name(fields, field, words):
    tenant = make_tenant().tenant
    with pytest.raises(ActionInputError) as refused:
        define(tenant, **fields)
    assert refused.value.field == field and words in str(refused.value)
    assert not Action.objects.filter(tenant=tenant).exists()


def test_the_secrets_are_encrypted_at_rest_shown_once_and_kept_when_left_empty():
    tenant = make_tenant().tenant
    saved = define(tenant, secret_header_name="Authorization", secret_header_value="Bearer sk-shop-123")
    action = Action.objects.get(pk=saved.action.pk)
    assert saved.secret_header_value == "Bearer sk-shop-123" and saved.signing_secret.startswith("acsec_")
    assert "sk-shop-123" not in action.secret_header_encrypted
    assert secret_decrypt(action.secret_header_encrypted) == "Bearer sk-shop-123"
    assert secret_decrypt(action.signing_secret_encrypted) == saved.signing_secret
    again = services.action_update(action=action, by=None, secret_header_name="Authorization",
                                   secret_header_value="", description="Look up an order.")
    assert again.secret_header_value == "" and secret_decrypt(action.secret_header_encrypted) == "Bearer sk-shop-123"
    entry = AuditLog.objects.filter(entity="action", action="update").get()
    assert "description" in entry.changes and "sk-shop" not in str(entry.changes)


def test_in_the_console_an_admin_adds_an_action_sees_its_secrets_once_and_a_bad_url_beside_its_field(client):
    tenant = make_tenant().tenant
    admin = user()
    Membership.objects.create(tenant=tenant, user=admin, role="admin")
    client.force_login(admin)
    url = f"/console/t/{tenant.slug}/actions/"
    form = {"name": "order_status", "description": "Look up an order.", "parameters": '{"type": "object", '
            '"properties": {"order_id": {"type": "string"}}}', "method": "GET", "who": "verified",
            "url_template": "https://{order_id}.example.com/", "timeout_s": "5", "enabled": "on",
            "secret_header_name": "Authorization", "secret_header_value": "Bearer sk-1"}
    refused = client.post(url, form)
    assert refused.status_code == 400 and b"scheme and host are fixed" in refused.content
    made = client.post(url, {**form, "url_template": "https://shop.example.com/orders/{order_id}"})
    assert made.status_code == 201
    action = Action.objects.get(tenant=tenant)
    assert b"Bearer sk-1" in made.content and b"acsec_" in made.content
    page = client.get(f"{url}{action.pk}/")
    assert page.status_code == 200 and b"Bearer sk-1" not in page.content and b"acsec_" not in page.content
    other = make_tenant().tenant
    assert client.get(f"/console/t/{other.slug}/actions/{action.pk}/").status_code == 404
