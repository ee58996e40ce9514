import pytest

from inference.heartbeats import HeartbeatThread
from inference.redis_client import get_redis
from tests.factories import UserFactory, make_tenant

pytestmark = pytest.mark.django_db


def test_the_console_requires_staff(client):
    assert client.get("/console/").status_code == 302
    client.force_login(UserFactory())
    assert client.get("/console/").status_code == 302


def test_the_console_shows_tenants_usage_and_live_workers(client):
    tenant = make_tenant(requests_per_minute=77).tenant
    beat = HeartbeatThread(get_redis(), name="decode.console-test@host:1", role="decode", pool="console-test",
                           static={"device": "cpu", "dtype": "bfloat16", "model": "m"},
                           dynamic=lambda: {"batch": 3, "max_batch": 64, "tokens_per_s": 512.0})
    beat.beat()
    try:
        client.force_login(UserFactory(is_staff=True))
        page = client.get("/console/").content.decode()
    finally:
        beat.stop()
    assert tenant.slug in page and "/ 77" in page
    assert "decode.console-test@host:1" in page and "3/64" in page
