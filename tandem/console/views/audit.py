"""Audit log: every change to quotas, allocations, keys, members and pools, with who,
when and old → new. Operators see all of it; a tenant's owners see the tenant's."""

from __future__ import annotations

from django.core.paginator import Paginator

from tenants import selectors
from tenants.membership import Can

from .base import operator_page, render_page, tenant_page

PAGE_SIZE = 100
ENTITIES = ["quota", "allocation", "api_key", "membership", "pool", "tenant"]


def _page(request, rows):
    entity = request.GET.get("entity", "")
    if entity in ENTITIES:
        rows = rows.filter(entity=entity)
    return {"page": Paginator(rows, PAGE_SIZE).get_page(request.GET.get("page")), "entity": entity,
            "entities": ENTITIES}


@operator_page(methods=("GET",))
def audit_all(request):
    return render_page(request, "console/audit.html", _page(request, selectors.audit_list()), nav="audit")


@tenant_page(read=Can.AUDIT, methods=("GET",))
def tenant_audit(request, access):
    return render_page(request, "console/audit.html", _page(request, selectors.audit_list(tenant=access.tenant)),
                       access=access, nav="tenant-audit")
