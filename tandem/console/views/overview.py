"""Overview: the live numbers (polled by htmx) and the charts (JSON for uPlot), overall
for operators and per tenant for everyone."""

from __future__ import annotations

from django.http import JsonResponse
from django.views.decorators.http import require_GET

from tenants import invitations, membership

from .. import selectors
from .base import render_page, signed_in, tenant_page


def _visible(request):
    return list(membership.visible_tenants(request.user).select_related("quota").order_by("name"))


def _live_context(tenants):
    total, per = selectors.overview_live(tenants)
    rows = [{"tenant": t, "live": per[t.pk]} for t in tenants]
    return {"total": total, "rows": rows}


@signed_in
@require_GET
def overview(request):
    tenants = _visible(request)
    return render_page(request, "console/overview.html",
                       {**_live_context(tenants), "tenants": tenants,
                        "invitation_count": invitations.invitations_for_user(user=request.user).count()},
                       nav="overview")


@signed_in
@require_GET
def overview_live(request):
    return render_page(request, "console/partials/overview_live.html", _live_context(_visible(request)))


@signed_in
@require_GET
def overview_charts(request):
    ids = None if membership.is_operator(request.user) else [t.pk for t in _visible(request)]
    return JsonResponse(selectors.chart_data(tenant_ids=ids, range_name=request.GET.get("range", "hour")))


@tenant_page(methods=("GET",))
def tenant_overview(request, access):
    ctx = _live_context([access.tenant])
    return render_page(request, "console/tenant_overview.html",
                       {**ctx, "live": ctx["rows"][0]["live"], "gauges": selectors.quota_gauges(access.tenant)},
                       access=access, nav="usage")


@tenant_page(methods=("GET",))
def tenant_overview_live(request, access):
    ctx = _live_context([access.tenant])
    return render_page(request, "console/partials/tenant_live.html",
                       {**ctx, "live": ctx["rows"][0]["live"], "gauges": selectors.quota_gauges(access.tenant)},
                       access=access)


@tenant_page(methods=("GET",))
def tenant_charts(request, access):
    return JsonResponse(selectors.chart_data(tenant_ids=[access.tenant.pk],
                                             range_name=request.GET.get("range", "hour")))
