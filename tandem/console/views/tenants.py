"""Tenants (operators): the list with live usage against quota, create (keys shown
once), deactivate; and every tenant's Quotas and Hardware allocation pages (operators
edit, members read)."""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.db import IntegrityError
from django.shortcuts import redirect

from tenants import membership, services
from tenants.membership import Can
from tenants.models import Tenant

from .. import selectors
from ..forms import AllocationForm, QuotaForm, TenantCreateForm, apply_errors
from .base import actor, operator_page, render_page, tenant_page


def _rows():
    tenants = list(Tenant.objects.select_related("quota", "allocation__prefill_pool",
                                                 "allocation__decode_pool").order_by("name"))
    rows = selectors.tenant_rows(tenants)
    attention = [r for r in rows if r["level"] in ("warn", "full") and r["tenant"].is_active]
    return {"rows": rows, "attention": attention}


@operator_page(methods=("GET",))
def tenant_list(request):
    return render_page(request, "console/tenants.html", _rows(), nav="tenants")


@operator_page(methods=("GET",))
def tenant_list_rows(request):
    return render_page(request, "console/partials/tenant_rows.html", _rows())


@operator_page()
def tenant_create(request):
    form = TenantCreateForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            created = services.tenant_create(
                slug=form.cleaned_data["slug"], name=form.cleaned_data["name"],
                allowed_origins=services.origins_clean(form.cleaned_data["allowed_origins"]),
                actor=actor(request))
        except ValidationError as exc:
            exc = ValidationError({"allowed_origins": exc.messages}) if not hasattr(exc, "error_dict") else exc
            apply_errors(form, exc)
        except IntegrityError:
            form.add_error("slug", "A tenant with this slug already exists.")
        else:
            # The plaintext keys are in this response only: never stored, never shown again.
            return render_page(request, "console/tenant_created.html", {"created": created}, nav="tenants")
    return render_page(request, "console/tenant_create.html", {"form": form}, nav="tenants",
                       status=400 if form.errors else 200)


@tenant_page(write=Can.OPERATE, methods=("POST",))
def tenant_set_active(request, access):
    active = request.POST.get("active") == "1"
    services.tenant_set_active(tenant=access.tenant, active=active, actor=actor(request))
    messages.success(request, f"{access.tenant.name} is {'active' if active else 'deactivated'}: "
                              f"{'its keys work again' if active else 'its keys stop working at their next request'}.")
    return redirect("console:tenants")


def _quota_initial(quota):
    return {f: getattr(quota, f) for f in services.QUOTA_FIELDS}


@tenant_page(write=Can.OPERATE)
def quotas(request, access):
    quota = access.tenant.quota
    form = QuotaForm(request.POST or None, initial=_quota_initial(quota))
    if request.method == "POST" and form.is_valid():
        try:
            services.quota_update(tenant=access.tenant, actor=actor(request), **form.cleaned_data)
        except ValidationError as exc:
            apply_errors(form, exc)
        else:
            messages.success(request, "Saved. The new quota applies to the tenant's next request.")
            return redirect("console:quotas", slug=access.tenant.slug)
    return render_page(request, "console/quotas.html",
                       {"form": form if access.can_operate else None, "quota": quota,
                        "gauges": selectors.quota_gauges(access.tenant),
                        "readonly": [(form[f].label, getattr(quota, f)) for f in services.QUOTA_FIELDS]},
                       access=access, nav="quotas", status=400 if form.errors else 200)


@tenant_page(write=Can.OPERATE)
def allocation(request, access):
    alloc = access.tenant.allocation
    initial = {"prefill_pool": alloc.prefill_pool_id, "decode_pool": alloc.decode_pool_id,
               "priority": alloc.priority, "max_decode_slots": alloc.max_decode_slots}
    form = AllocationForm(request.POST or None, initial=initial)
    if request.method == "POST" and form.is_valid():
        try:
            services.allocation_update(tenant=access.tenant, actor=actor(request), **form.cleaned_data)
        except ValidationError as exc:
            apply_errors(form, exc)
        else:
            messages.success(request, "Saved. The tenant's next request is routed by the new allocation.")
            return redirect("console:allocation", slug=access.tenant.slug)
    # Other tenants' names are for operators: a member sees how many share a pool.
    pools = selectors.pools_overview(with_tenants=access.is_staff)
    mine = {alloc.prefill_pool_id, alloc.decode_pool_id}
    if not access.is_staff:  # a dedicated pool's name may be another tenant's
        pools = [p for p in pools if p["pool"].pk in mine]
    return render_page(request, "console/allocation.html",
                       {"form": form if access.can_operate else None, "alloc": alloc, "pools": pools,
                        "mine": mine, "is_operator": membership.is_operator(request.user)},
                       access=access, nav="allocation", status=400 if form.errors else 200)
