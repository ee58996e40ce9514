"""The webhook endpoints over REST, in-process (Django's test client): the secret shown
once and encrypted at rest, list/read/change/delete, the test event, the errors (400
naming the field, 404 for another tenant's endpoint, never a 500)."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from tandem.webhooks.crypto import secret_decrypt
from tandem.webhooks.models import Delivery, Endpoint
from tests.factories import make_tenant

BASE = "/api/v1/webhooks/"


def client_for(t) -> Client:
    return Client(headers={"Authorization": f"Bearer {t.secret_key.plaintext}"})


def post(c, path, body):
    return c.post(path, data=json.dumps(body), content_type="application/json")


@pytest.mark.django_db
def test_an_endpoint_is_created_with_its_secret_shown_once_then_listed_changed_and_deleted():
    c = client_for(make_tenant())
    resp = post(c, BASE, {"url": "https://hooks.example.com/tandem", "events": ["message.created"],
                          "description": "CRM"})
    assert resp.status_code == 201, resp.content
    created = resp.json()
    assert created["secret"].startswith("whsec_") and created["events"] == ["message.created"]
    stored = Endpoint.objects.get(pk=created["id"])
    assert created["secret"] not in stored.secret_encrypted
    assert secret_decrypt(stored.secret_encrypted) == created["secret"]
    listed = c.get(BASE).json()["data"]
    assert [e["id"] for e in listed] == [created["id"]] and "secret" not in listed[0]
    assert "secret" not in c.get(f"{BASE}{created['id']}/").json()
    resp = c.patch(f"{BASE}{created['id']}/", data=json.dumps({"events": ["reply.failed", "conversation.created"],
                                                               "enabled": False}), content_type="application/json")
    assert resp.status_code == 200
    assert resp.json()["events"] == ["conversation.created", "reply.failed"] and resp.json()["enabled"] is False
    assert c.delete(f"{BASE}{created['id']}/").status_code == 204
    assert not Endpoint.objects.filter(pk=created["id"]).exists()


@pytest.mark.django_db
def test_sending_a_test_event_queues_one_delivery_of_a_webhook_test_event():
    c = client_for(make_tenant())
    endpoint = post(c, BASE, {"url": "https://hooks.example.com/", "events": ["reply.failed"]}).json()
    resp = post(c, f"{BASE}{endpoint['id']}/test/", {})
    assert resp.status_code == 202, resp.content
    assert resp.json()["type"] == "webhook.test" and resp.json()["status"] == "pending"
    log = c.get(f"{BASE}{endpoint['id']}/deliveries/").json()["data"]
    assert [d["id"] for d in log] == [resp.json()["id"]]
    assert json.loads(Delivery.objects.get(pk=resp.json()["id"]).event.body)["tenant"] == Endpoint.objects.get(
        pk=endpoint["id"]).tenant.slug


@pytest.mark.django_db
@pytest.mark.parametrize("body,param", [
    ({"events": ["message.created"]}, "url"),
    ({"url": "ftp://example.com/", "events": ["message.created"]}, "url"),
    ({"url": "https://user:pw@example.com/", "events": ["message.created"]}, "url"),
    ({"url": "http://10.0.0.5/hook", "events": ["message.created"]}, "url"),
    ({"url": "http://169.254.169.254/latest/meta-data/", "events": ["message.created"]}, "url"),
    ({"url": "http://[::1]:8080/", "events": ["message.created"]}, "url"),
    ({"url": "https://example.com/", "events": []}, "events"),
    ({"url": "https://example.com/", "events": ["order.shipped"]}, "events"),
    ({"url": "https://example.com/", "events": ["message.created"], "colour": "red"}, "colour"),
    ({"url": "https://example.com/", "events": ["message.created"], "description": None}, "description"),
    ({"url": "https://example.com/", "events": "message.created"}, "events"),
])
def test_bad_endpoint_input_is_a_400_naming_the_field(body, param):
    resp = post(client_for(make_tenant()), BASE, body)
    assert resp.status_code == 400, resp.content
    assert resp.json()["error"]["param"] == param


@pytest.mark.django_db
def test_another_tenants_endpoint_is_answered_like_a_missing_one():
    mine, theirs = make_tenant(), make_tenant()
    endpoint = post(client_for(theirs), BASE, {"url": "https://example.com/", "events": ["reply.failed"]}).json()
    c = client_for(mine)
    for resp in (c.get(f"{BASE}{endpoint['id']}/"), post(c, f"{BASE}{endpoint['id']}/test/", {}),
                 c.get(f"{BASE}{endpoint['id']}/deliveries/"), c.delete(f"{BASE}{endpoint['id']}/"),
                 c.get(f"{BASE}not-a-uuid/")):
        assert resp.status_code == 404 and resp.json()["error"]["code"] == "webhook_not_found"
    assert c.get(BASE).json()["data"] == []
    assert Endpoint.objects.filter(pk=endpoint["id"]).exists()


def test_the_webhook_endpoints_need_a_secret_key(db):
    assert Client().get(BASE).status_code == 401


@pytest.mark.django_db
def test_a_patch_with_null_or_a_non_boolean_enabled_is_a_400_and_changes_nothing():
    c = client_for(make_tenant())
    endpoint = post(c, BASE, {"url": "https://example.com/", "events": ["reply.failed"]}).json()
    for body, param in (({"url": None}, "url"), ({"enabled": "yes"}, "enabled")):
        resp = c.patch(f"{BASE}{endpoint['id']}/", data=json.dumps(body), content_type="application/json")
        assert resp.status_code == 400 and resp.json()["error"]["param"] == param
    assert c.get(f"{BASE}{endpoint['id']}/").json() == {k: v for k, v in endpoint.items() if k != "secret"}
