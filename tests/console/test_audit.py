"""The audit log: who changed what, when, old → new, whichever door the change came
through; operators read all of it, a tenant's owners the tenant's."""

from __future__ import annotations

import re

import pytest

from tenants.models import AuditLog, ComputePool, Invitation, Membership
from tests.console.conftest import admin_form_data

pytestmark = pytest.mark.django_db

QUOTA = {"requests_per_minute": 60, "tokens_per_minute": 100000, "max_concurrent_streams": 16,
         "daily_token_budget": 2000000, "max_prompt_tokens": 1536, "max_output_tokens": 512}


def test_a_quota_change_in_the_console_is_logged_with_old_and_new_values(client, world):
    client.force_login(world.staff)
    client.post("/console/t/alpha/quotas/", {**QUOTA, "requests_per_minute": 3, "max_output_tokens": 64})
    record = AuditLog.objects.get(entity="quota", tenant=world.a.tenant)
    assert record.changes == {"requests_per_minute": [60, 3], "max_output_tokens": [512, 64]}
    assert (record.actor, record.actor_name, record.source, record.action) == (
        world.staff, world.staff.username, "console", "update")
    html = client.get("/console/audit/").content.decode()
    assert re.search(r'requests_per_minute</span>:\s*<span class="mono">60</span> → <b class="mono">3</b>', html)


def test_saving_an_unchanged_form_logs_nothing(client, world):
    client.force_login(world.staff)
    client.post("/console/t/alpha/quotas/", QUOTA)
    assert not AuditLog.objects.filter(entity="quota").exists()


def test_a_quota_change_in_the_django_admin_is_logged_too(client, world):
    client.force_login(world.staff)
    world.staff.is_superuser = True
    world.staff.save()
    tenant = world.a.tenant
    page = client.get(f"/admin/tenants/tenant/{tenant.pk}/change/")
    form = admin_form_data(page, **{"quota-0-requests_per_minute": 7})
    assert client.post(f"/admin/tenants/tenant/{tenant.pk}/change/", form).status_code == 302
    record = AuditLog.objects.get(entity="quota", tenant=tenant)
    assert record.changes == {"requests_per_minute": [60, 7]} and record.source == "admin"


def test_pool_and_membership_changes_in_the_admin_are_logged(client, world):
    world.staff.is_superuser = True
    world.staff.save()
    client.force_login(world.staff)
    pool = ComputePool.objects.get(slug="shared", role="decode")
    client.post(f"/admin/tenants/computepool/{pool.pk}/change/",
                {"slug": "shared", "role": "decode", "device": "h200", "max_batch": 64,
                 "description": pool.description})
    assert AuditLog.objects.get(entity="pool", source="admin").changes == {"device": ["cpu", "h200"]}
    m = Membership.objects.get(user=world.viewer_a)
    client.post(f"/admin/tenants/membership/{m.pk}/delete/", {"post": "yes"})
    record = AuditLog.objects.get(entity="membership", action="delete", source="admin")
    assert record.tenant == world.a.tenant and record.changes["role"] == ["viewer", None]


def test_keys_members_and_allocations_changed_in_the_console_are_logged(client, world):
    client.force_login(world.owner_a)
    client.post("/console/t/alpha/keys/new/", {"kind": "secret", "name": "audited"})
    client.post("/console/t/alpha/members/", {"user": world.owner_b.username, "role": "viewer"})
    client.force_login(world.owner_b)  # the invited person says yes
    invitation = Invitation.objects.get(tenant=world.a.tenant, identifier=world.owner_b.username)
    client.post(f"/console/invitations/{invitation.pk}/accept/")
    assert set(AuditLog.objects.filter(actor=world.owner_b).values_list("entity", "action")) >= {
        ("invitation", "accept"), ("membership", "create")}
    client.force_login(world.owner_a)
    m = Membership.objects.get(user=world.owner_b, tenant=world.a.tenant)
    client.post(f"/console/t/alpha/members/{m.pk}/role/", {f"m{m.pk}-role": "admin"})
    actions = set(AuditLog.objects.filter(actor=world.owner_a).values_list("entity", "action"))
    assert {("api_key", "create"), ("invitation", "create"), ("membership", "update")} <= actions
    assert AuditLog.objects.get(entity="membership", action="update").changes == {"role": ["viewer", "admin"]}


def test_owners_see_their_tenants_log_only_and_others_see_none(client, world):
    client.force_login(world.owner_b)
    client.post("/console/t/bravo/members/", {"user": world.viewer_a.username, "role": "viewer"})
    client.force_login(world.owner_a)
    client.post("/console/t/alpha/keys/new/", {"kind": "secret", "name": "alpha-audit-key"})
    html = client.get("/console/t/alpha/audit/").content.decode()
    assert "alpha-audit-key" in html and "invited to bravo" not in html
    assert client.get("/console/audit/").status_code == 404
    client.force_login(world.admin_a)
    assert client.get("/console/t/alpha/audit/").status_code == 403
    client.force_login(world.staff)
    everything = client.get("/console/audit/").content.decode()
    assert "alpha-audit-key" in everything and "invited to bravo" in everything
