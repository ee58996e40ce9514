"""A public widget key cannot let one script spend the tenant's quota (issue 19, finding
3): limits per visitor and per client IP in the same atomic admission, visitor ids the
server issues and signs, the client IP from trusted proxies only, and the refusals in
the tenant's usage data."""

from __future__ import annotations

import uuid

import pytest

from inference.wire.connections import get_redis
from tandem.chat import services
from tandem.chat.visitors import Visitor, visitor_token_for, visitor_token_issue, visitor_token_read
from tandem.net import client_ip
from tenants import quotas
from tests.factories import make_tenant

pytestmark = pytest.mark.django_db(transaction=True)


def send(created, visitor: Visitor, ip: str):
    return services.chat_submit(api_key=created.widget_key.api_key, messages=[("user", "Hi")],
                                visitor=visitor, client_ip=ip)


def test_a_flood_from_one_visitor_and_one_ip_leaves_other_visitors_of_the_tenant_served(settings):
    settings.TANDEM_WIDGET_VISITOR_RPM, settings.TANDEM_WIDGET_IP_RPM = 3, 6
    settings.TANDEM_WIDGET_VISITOR_STREAMS = settings.TANDEM_WIDGET_IP_STREAMS = 100
    # One-token replies: the admitted requests reach the session's platform too, and must not
    # hold its two decode slots for the tests after this one.
    created = make_tenant(requests_per_minute=10, max_output_tokens=1)
    attacker = Visitor(visitor_id="attacker")
    refused = []
    for _ in range(3):
        send(created, attacker, "203.0.113.9")
    with pytest.raises(services.QuotaRefused) as one:
        send(created, attacker, "203.0.113.9")
    assert one.value.reason == "visitor_requests_per_minute" and one.value.code == "rate_limited"
    # New visitor ids from the same address do not get around it: the IP's own limit.
    for _ in range(10):
        try:
            send(created, Visitor(visitor_id=uuid.uuid4().hex), "203.0.113.9")
        except services.QuotaRefused as exc:
            refused.append(exc.reason)
    assert refused.count("ip_requests_per_minute") == 7
    # Everyone else is still served, from the tenant's remaining quota.
    for n in range(4):
        assert send(created, Visitor(visitor_id=f"real-{n}"), f"198.51.100.{n}").admission.allowed
    # The tenant's owner sees what was refused and why.
    usage = quotas.usage_snapshot(get_redis(), tenant_id=created.tenant.pk,
                                  limits=quotas.QuotaLimits.from_quota(created.tenant.quota))
    assert usage["refused_today"] == {"visitor_requests_per_minute": 1, "ip_requests_per_minute": 7}
    from django.test import Client
    body = Client().get("/api/v1/usage/", HTTP_AUTHORIZATION=f"Bearer {created.secret_key.plaintext}").json()
    assert body["refused_today"] == usage["refused_today"]


def test_visitor_ids_are_issued_and_signed_by_the_server_per_tenant():
    tenant, other = make_tenant().tenant, make_tenant().tenant
    visitor_id, token = visitor_token_issue(tenant=tenant)
    assert visitor_token_read(tenant=tenant, token=token) == visitor_id
    assert visitor_token_read(tenant=other, token=token) is None  # another tenant's widget
    assert visitor_token_read(tenant=tenant, token="v-1") is None  # invented by the client
    assert visitor_token_read(tenant=tenant, token=token[:-1] + "x") is None
    assert visitor_token_read(tenant=tenant, token=visitor_token_for(tenant=tenant, visitor_id="v-1")) == "v-1"


def test_x_forwarded_for_is_believed_only_from_a_trusted_proxy(settings):
    settings.TANDEM_TRUSTED_PROXIES = ["10.0.0.0/8"]
    assert client_ip("203.0.113.9", "1.2.3.4") == "203.0.113.9"  # forged by the client
    assert client_ip("10.0.0.2", "1.2.3.4") == "1.2.3.4"
    # The proxy appends the peer it saw; what the client wrote before that is not believed.
    assert client_ip("10.0.0.2", "6.6.6.6, 1.2.3.4, 10.0.0.7") == "1.2.3.4"
    assert client_ip("10.0.0.2", "not-an-ip") == "10.0.0.2"
    settings.TANDEM_TRUSTED_PROXIES = []
    assert client_ip("10.0.0.2", "1.2.3.4") == "10.0.0.2"
