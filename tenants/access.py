"""Access helpers: the one place that decides whether a row belongs to a tenant.

Every read of tenant-owned data by id or by list goes through `access_owned` or
`access_list`, so no view, consumer or page can forget the tenant filter. Another
tenant's id is answered exactly like an id that does not exist (`NotFound`), so ids
reveal nothing across tenants (as Zulip's `access_stream_*` helpers do).

A model whose tenant is reached through a relation names that path in a class attribute
`TENANT_PATH` (e.g. a message: "conversation__tenant"); the default is a `tenant`
field. This package knows nothing else of the models it scopes."""

from __future__ import annotations

import uuid

from django.db.models import Model, QuerySet

from .models import Tenant


class NotFound(Exception):
    """No such row for this tenant: missing, or another tenant's."""

    def __init__(self, what: str):
        super().__init__(f"No such {what}.")
        self.code = f"{what}_not_found"


def _queryset(source: type[Model] | QuerySet) -> QuerySet:
    return source if isinstance(source, QuerySet) else source.objects.all()


def access_list(source: type[Model] | QuerySet, *, tenant: Tenant) -> QuerySet:
    """`source` (a model or a queryset of it) narrowed to `tenant`'s rows."""
    qs = _queryset(source)
    path = getattr(qs.model, "TENANT_PATH", "tenant")
    return qs.filter(**{path: tenant})


def access_owned(source: type[Model] | QuerySet, what: str, *, tenant: Tenant, pk) -> Model:
    """One row by its UUID, only if it belongs to `tenant`; raises NotFound(what)
    otherwise, for a malformed id too."""
    try:
        pk = uuid.UUID(str(pk))
    except (TypeError, ValueError, AttributeError):
        raise NotFound(what) from None
    row = access_list(source, tenant=tenant).filter(pk=pk).first()
    if row is None:
        raise NotFound(what)
    return row
