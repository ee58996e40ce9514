import pytest

from inference.wire.connections import get_redis
from inference.worker.heartbeats import HeartbeatThread
from tests.console.conftest import admin_form_data
from tests.factories import UserFactory, make_tenant

pytestmark = pytest.mark.django_db


def test_the_console_requires_sign_in_and_its_operator_pages_staff(client):
    assert client.get("/console/").status_code == 302
    client.force_login(UserFactory())
    assert "not a member of any tenant" in client.get("/console/").content.decode()
    assert client.get("/console/tenants/").status_code == 404


def test_the_console_shows_tenants_usage_and_live_workers(client):
    tenant = make_tenant(requests_per_minute=77).tenant
    beat = HeartbeatThread(get_redis(), name="decode.console-test@host:1", role="decode", pool="console-test",
                           static={"device": "cpu", "dtype": "bfloat16", "model": "m"},
                           dynamic=lambda: {"batch": 3, "max_batch": 64, "tokens_per_s": 512.0})
    beat.beat()
    try:
        client.force_login(UserFactory(is_staff=True))
        tenants_page = client.get("/console/tenants/").content.decode()
        hardware_page = client.get("/console/hardware/").content.decode()
    finally:
        beat.stop()
    assert tenant.slug in tenants_page and "0 / 77" in tenants_page
    # a worker whose pool has no ComputePool row is listed apart: nobody is routed to it
    outside = hardware_page.split('aria-label="Workers outside any pool"')[1]
    assert "decode.console-test@host:1" in outside and "3/64" in outside


def test_a_tenant_added_in_the_admin_with_its_inlines_untouched_gets_the_default_setup(client):
    from tenants.models import Tenant

    client.force_login(UserFactory(is_staff=True, is_superuser=True))
    page = client.get("/admin/tenants/tenant/add/")
    # What a browser submits: the tenant's fields, and the inline forms (quota,
    # allocation) exactly as the page fills them in, which Django saves nothing for.
    form = admin_form_data(page, slug="admin-made", name="Admin Made", is_active="on", system_prompt="Be kind.")
    resp = client.post("/admin/tenants/tenant/add/", form)
    assert resp.status_code == 302
    tenant = Tenant.objects.get(slug="admin-made")
    assert tenant.quota.requests_per_minute > 0
    assert (tenant.allocation.prefill_pool.slug, tenant.allocation.decode_pool.slug) == ("shared", "shared")
    assert "admin-made" in client.get("/console/tenants/").content.decode()  # the console serves it
