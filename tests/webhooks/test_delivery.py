"""Deliveries end to end: a real webhooks worker (Celery, the CPU tier's `webhooks`
queue) POSTs to a real HTTP receiver on 127.0.0.1, which the operator setting allows.
The signature is checked with the snippet docs/webhooks.md gives, taken from the doc."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from tandem.webhooks import services
from tandem.webhooks.events import event_emit
from tandem.webhooks.models import Delivery
from tests.factories import make_tenant

from .conftest import RETRY_BASE_S

DOC = Path(__file__).resolve().parents[2] / "docs" / "webhooks.md"
pytestmark = pytest.mark.django_db(transaction=True)


def documented_verifier():
    """verify_tandem_signature, as the doc's Python block defines it."""
    code = re.search(r"```python\n(.*?)```", DOC.read_text(), re.S).group(1)
    namespace: dict = {}
    exec(compile(code, str(DOC), "exec"), namespace)
    return namespace["verify_tandem_signature"]


def delivery_when(delivery_id, predicate, timeout: float = 30) -> Delivery:
    """The delivery once `predicate` holds for it (the worker records its attempts)."""
    deadline = time.monotonic() + timeout
    while True:
        d = Delivery.objects.get(pk=delivery_id)
        if predicate(d):
            return d
        assert time.monotonic() < deadline, f"delivery stayed {d.status} after {d.attempts} attempts: {d.error}"
        time.sleep(0.05)


def test_an_event_arrives_once_with_a_signature_the_documented_snippet_verifies(webhooks_worker, receiver,
                                                                                allow_loopback):
    t = make_tenant()
    made = services.endpoint_create(tenant=t.tenant, url=receiver.url, events=["reply.failed"])
    event = event_emit(tenant_id=t.tenant.pk, type="reply.failed", data={"message": "m1", "code": "no_worker"})
    [got] = receiver.wait_for(1)
    verify = documented_verifier()
    assert verify(made.secret, got.headers["tandem-signature"], got.body)
    assert not verify("whsec_another", got.headers["tandem-signature"], got.body)
    assert not verify(made.secret, got.headers["tandem-signature"], got.body + b" ")
    assert got.headers["tandem-event-id"] == event.id
    assert got.event == {"id": event.id, "type": "reply.failed", "created": got.event["created"],
                         "tenant": t.tenant.slug, "data": {"message": "m1", "code": "no_worker"}}
    d = delivery_when(event.deliveries.get().pk, lambda d: d.status == "succeeded")
    assert d.attempts == 1 and d.response_code == 200 and d.duration_ms is not None


def test_the_documented_snippet_refuses_a_signature_older_than_its_tolerance():
    from tandem.webhooks.signing import signature_header

    verify = documented_verifier()
    old = signature_header(secret="whsec_x", body=b"{}", timestamp=int(time.time()) - 301)
    assert not verify("whsec_x", old, b"{}")
    assert verify("whsec_x", signature_header(secret="whsec_x", body=b"{}", timestamp=int(time.time())), b"{}")


def test_a_receiver_answering_500_twice_gets_retries_with_growing_waits_then_success(webhooks_worker, receiver,
                                                                                     allow_loopback):
    receiver.answers = [500, 503]
    t = make_tenant()
    endpoint = services.endpoint_create(tenant=t.tenant, url=receiver.url, events=["message.created"]).endpoint
    delivery = services.endpoint_test(endpoint=endpoint)
    first, second, third = receiver.wait_for(3)
    assert {r.headers["tandem-event-id"] for r in (first, second, third)} == {delivery.event_id}
    assert second.at - first.at >= RETRY_BASE_S * 0.9
    assert third.at - second.at >= 2 * RETRY_BASE_S * 0.9
    d = delivery_when(delivery.pk, lambda d: d.status == "succeeded")
    assert d.attempts == 3 and d.response_code == 200
    endpoint.refresh_from_db()
    assert endpoint.failing_since is None and endpoint.enabled


def test_a_name_that_resolves_to_a_loopback_address_is_refused_at_delivery(webhooks_worker, receiver,
                                                                           allow_loopback):
    t = make_tenant()
    url = receiver.url.replace("127.0.0.1", "localhost")  # allowed: 127.0.0.1 as spelled, not this name
    endpoint = services.endpoint_create(tenant=t.tenant, url=url, events=["message.created"]).endpoint
    delivery = services.endpoint_test(endpoint=endpoint)
    d = delivery_when(delivery.pk, lambda d: d.attempts >= 1 and d.status == "pending")
    assert "loopback" in d.error and "refused" in d.error and d.response_code is None
    assert d.next_attempt_at is not None
    assert receiver.received == []


def test_resend_delivers_the_same_event_again_as_a_new_delivery(webhooks_worker, receiver, allow_loopback):
    t = make_tenant()
    endpoint = services.endpoint_create(tenant=t.tenant, url=receiver.url, events=["message.created"]).endpoint
    first = services.endpoint_test(endpoint=endpoint)
    receiver.wait_for(1)
    again = services.delivery_resend(delivery=delivery_when(first.pk, lambda d: d.status == "succeeded"))
    one, two = receiver.wait_for(2)
    assert one.body == two.body and two.headers["tandem-event-id"] == first.event_id
    assert delivery_when(again.pk, lambda d: d.status == "succeeded").pk != first.pk


def test_a_receiver_that_does_not_answer_within_5_s_is_a_failed_attempt_retried_later(webhooks_worker, receiver,
                                                                                       allow_loopback):
    receiver.delay_s = 7.0
    t = make_tenant()
    endpoint = services.endpoint_create(tenant=t.tenant, url=receiver.url, events=["message.created"]).endpoint
    delivery = services.endpoint_test(endpoint=endpoint)
    d = delivery_when(delivery.pk, lambda d: d.attempts >= 1 and d.status == "pending" and d.error)
    assert "no answer within 5 s" in d.error and 4900 <= d.duration_ms < 6500 and d.response_code is None


def test_an_endpoint_failing_for_72_hours_is_disabled_and_its_waiting_deliveries_fail(webhooks_worker, receiver,
                                                                                      allow_loopback):
    from datetime import timedelta

    from django.utils import timezone

    from tandem.webhooks.models import Endpoint

    receiver.answers = [500]
    t = make_tenant()
    endpoint = services.endpoint_create(tenant=t.tenant, url=receiver.url, events=["message.created"]).endpoint
    Endpoint.objects.filter(pk=endpoint.pk).update(failing_since=timezone.now() - timedelta(hours=73))
    delivery = services.endpoint_test(endpoint=endpoint)
    d = delivery_when(delivery.pk, lambda d: d.status == "failed")
    endpoint.refresh_from_db()
    assert d.response_code == 500 and not endpoint.enabled and "3 days" in endpoint.disabled_reason
    assert services.endpoint_update(endpoint=endpoint, enabled=True).failing_since is None
