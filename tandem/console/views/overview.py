"""Overview: the live numbers (polled by htmx) and the charts (JSON for uPlot), overall
for operators and per tenant for everyone. A tenant's own overview is its
getting-started checklist (tandem.onboarding); its numbers are the Usage tab."""

from __future__ import annotations

from django.http import JsonResponse
from django.views.decorators.http import require_GET

from tandem import ops
from tandem.onboarding import selectors as setup_selectors
from tenants import invitations, membership

from .. import selectors
from .base import render_page, signed_in, tenant_page


def _visible(request):
    return list(membership.visible_tenants(request.user).select_related("quota").order_by("name"))


# The tenants table's orders: by name, or busiest / slowest / failing most first.
SORTS = {
    "name": ("Name", lambda r: r["tenant"].name.lower(), False),
    "requests": ("Requests/min", lambda r: r["live"].requests_per_min or 0, True),
    "tokens": ("Output tokens/s", lambda r: r["live"].output_tokens_per_s or 0, True),
    "ttft": ("TTFT p99", lambda r: r["live"].ttft_ms_p99 or 0, True),
    "errors": ("Error rate", lambda r: r["live"].error_rate_pct or 0, True),
}


def _live_context(tenants, request=None):
    """The totals over every tenant shown, and the table's rows: those whose name or
    slug holds ?q=, in the ?sort= order (by name when missing or unknown)."""
    total, per = selectors.overview_live(tenants)
    rows = [{"tenant": t, "live": per[t.pk]} for t in tenants]
    q = (request.GET.get("q", "") if request else "").strip()[:100]
    sort = request.GET.get("sort", "name") if request else "name"
    sort = sort if sort in SORTS else "name"
    if q:
        rows = [r for r in rows if q.lower() in r["tenant"].name.lower() or q.lower() in r["tenant"].slug]
    _, key, reverse = SORTS[sort]
    rows.sort(key=key, reverse=reverse)
    ctx = {"total": total, "rows": rows, "q": q, "sort": sort, "sorts": {k: v[0] for k, v in SORTS.items()},
           "sort_label": SORTS[sort][0],
           "tenant_count": len(tenants)}
    return ctx


@signed_in
@require_GET
def overview(request):
    tenants = _visible(request)
    return render_page(request, "console/overview.html",
                       {**_live_context(tenants, request), "tenants": tenants,
                        "health": ops.readiness() if membership.is_operator(request.user) else None,
                        "invitation_count": invitations.invitations_for_user(user=request.user).count()},
                       nav="overview")


@signed_in
@require_GET
def overview_live(request):
    if request.GET.get("part") == "health":  # the operators' health card, polled on its own
        if not membership.is_operator(request.user):
            raise membership.NotVisible("page")
        return render_page(request, "console/partials/health.html", {"health": ops.readiness()})
    return render_page(request, "console/partials/overview_live.html", _live_context(_visible(request), request))


@signed_in
@require_GET
def overview_charts(request):
    ids = None if membership.is_operator(request.user) else [t.pk for t in _visible(request)]
    return JsonResponse(selectors.chart_data(tenant_ids=ids, range_name=request.GET.get("range", "hour")))


@tenant_page(methods=("GET",))
def tenant_overview(request, access):
    steps = setup_selectors.checklist(access.tenant)
    return render_page(request, "console/tenant_overview.html",
                       {"steps": steps, "done": sum(s.done for s in steps)}, access=access, nav="tenant-overview")


@tenant_page(methods=("GET",))
def tenant_usage(request, access):
    ctx = _live_context([access.tenant])
    return render_page(request, "console/tenant_usage.html",
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
