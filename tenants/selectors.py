"""Reads scoped to a tenant. Every query for tenant-owned data goes through
`scope_to_tenant`, so no view or consumer can forget the tenant filter."""

from __future__ import annotations

from django.db.models import Model, QuerySet

from .models import Tenant

# Models whose tenant is reached through a relation rather than a `tenant` field.
_TENANT_PATHS: dict[str, str] = {
    "chat.message": "conversation__tenant",
}


def scope_to_tenant(queryset: QuerySet, *, tenant: Tenant) -> QuerySet:
    model: type[Model] = queryset.model
    path = _TENANT_PATHS.get(model._meta.label_lower, "tenant")
    return queryset.filter(**{path: tenant})


def tenant_get(*, slug: str) -> Tenant | None:
    return Tenant.objects.filter(slug=slug).first()


def tenant_list() -> QuerySet:
    return Tenant.objects.select_related("quota", "allocation").order_by("slug")
