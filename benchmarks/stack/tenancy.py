"""Tenants for a benchmark, made through the real service (quota, allocation on the
shared pools, keys), with their widget key allowed from the benchmark's origin."""

from __future__ import annotations

from dataclasses import dataclass

ORIGIN = "https://bench.tandem.test"


@dataclass
class BenchTenant:
    slug: str
    tenant_id: int
    widget_key: str
    system_prompt: str
    max_prompt_tokens: int
    max_output_tokens: int


def make_tenant(slug: str, *, quota: dict | None = None, allocation: dict | None = None) -> BenchTenant:
    """`allocation` fields (priority, max_decode_slots) are set after the service made it."""
    from tenants.models import Allocation
    from tenants.services import tenant_create

    created = tenant_create(slug=slug, name=slug.title(), allowed_origins=[ORIGIN], quota=quota)
    if allocation:
        Allocation.objects.filter(tenant=created.tenant).update(**allocation)
    t = created.tenant
    t.refresh_from_db()
    return BenchTenant(slug=slug, tenant_id=t.pk, widget_key=created.widget_key.plaintext,
                       system_prompt=t.system_prompt, max_prompt_tokens=t.quota.max_prompt_tokens,
                       max_output_tokens=t.quota.max_output_tokens)
