"""tenants.membership: who sees which tenant with what role, in one place."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import AnonymousUser
from django.core.exceptions import ValidationError

from tenants import membership, services
from tenants.membership import Can, NotAllowed, NotVisible
from tenants.models import ApiKey

pytestmark = pytest.mark.django_db


def test_each_role_has_exactly_its_capabilities():
    table = {role: {c for c in Can if membership.role_can(role, c)} for role in ("viewer", "agent", "admin", "owner", "staff")}
    assert table == {
        "viewer": {Can.VIEW},
        "agent": {Can.VIEW, Can.INBOX},
        "admin": {Can.VIEW, Can.MANAGE, Can.INBOX},
        "owner": {Can.VIEW, Can.MANAGE, Can.MEMBERS, Can.AUDIT, Can.INBOX},
        "staff": set(Can),
    }
    assert not membership.role_can(None, Can.VIEW)


def test_another_tenant_is_not_visible_exactly_like_a_missing_one(world):
    with pytest.raises(NotVisible) as other:
        membership.tenant_access(user=world.owner_a, slug="bravo")
    with pytest.raises(NotVisible) as missing:
        membership.tenant_access(user=world.owner_a, slug="no-such-tenant")
    assert str(other.value) == str(missing.value)
    with pytest.raises(NotVisible):
        membership.tenant_access(user=AnonymousUser(), slug="alpha")


def test_a_role_that_lacks_the_capability_is_not_allowed_but_sees_the_tenant(world):
    access = membership.tenant_access(user=world.viewer_a, slug="alpha")
    assert access.role == "viewer"
    with pytest.raises(NotAllowed):
        membership.tenant_access(user=world.viewer_a, slug="alpha", need=Can.MANAGE)
    with pytest.raises(NotAllowed):
        membership.tenant_access(user=world.owner_a, slug="alpha", need=Can.OPERATE)
    assert membership.tenant_access(user=world.staff, slug="bravo", need=Can.OPERATE).is_staff


def test_an_object_of_another_tenant_or_a_malformed_id_is_not_visible(world):
    access = membership.tenant_access(user=world.owner_a, slug="alpha")
    b_key = ApiKey.objects.filter(tenant=world.b.tenant).first()
    for pk in (b_key.pk, 10**9, "not-a-number"):
        with pytest.raises(NotVisible):
            membership.tenant_object(access, ApiKey.objects.all(), what="key", pk=pk)
    own = ApiKey.objects.filter(tenant=world.a.tenant).first()
    assert membership.tenant_object(access, ApiKey.objects.all(), what="key", pk=own.pk) == own


def test_visible_tenants_and_user_tenants(world):
    assert list(membership.visible_tenants(world.owner_a)) == [world.a.tenant]
    assert set(membership.visible_tenants(world.staff)) == {world.a.tenant, world.b.tenant}
    world.viewer_a.is_active = False
    assert list(membership.visible_tenants(world.viewer_a)) == []
    assert [(a.tenant.slug, a.role) for a in membership.user_tenants(world.admin_a)] == [("alpha", "admin")]


def test_the_services_refuse_what_the_rules_refuse(world):
    with pytest.raises(ValidationError, match="between"):
        services.allocation_update(tenant=world.a.tenant, prefill_pool=world.a.tenant.allocation.prefill_pool,
                                   decode_pool=world.a.tenant.allocation.decode_pool, priority=10**6,
                                   max_decode_slots=4)
    with pytest.raises(ValidationError, match="not a decode"):
        services.allocation_update(tenant=world.a.tenant, prefill_pool=world.a.tenant.allocation.prefill_pool,
                                   decode_pool=world.a.tenant.allocation.prefill_pool, priority=0,
                                   max_decode_slots=4)
    with pytest.raises(ValidationError):
        services.quota_update(tenant=world.a.tenant, requests_per_minute=-1)
    with pytest.raises(ValidationError, match="Role must be"):
        services.member_add(tenant=world.a.tenant, identifier=world.owner_b.username, role="superhero")
    assert services.origins_clean([" HTTPS://Shop.Example/ ", "https://shop.example"]) == ["https://shop.example"]
    for bad in ("ftp://x.example", "https://x.example/path", "https://user@x.example", "https://x.example:99999"):
        with pytest.raises(ValidationError):
            services.origins_clean([bad])
