"""The operator console: every tenant's usage against its quota and allocation, and the
live workers with their batch occupancy. Editing happens in the Django admin, which the
page links to; this page is the at-a-glance view."""

from django.contrib.admin.views.decorators import staff_member_required
from django.shortcuts import render

from inference.wire.connections import get_redis
from inference.wire.workers import live_workers
from tenants.selectors import tenant_list, tenant_usage_vs_quota


@staff_member_required
def overview(request):
    client = get_redis()
    tenants = [{"tenant": t, **tenant_usage_vs_quota(client, tenant=t)} for t in tenant_list()]
    workers = sorted(live_workers(client), key=lambda w: (w["role"], w["pool"], w["name"]))
    for w in workers:  # prefill workers report their batcher's queue, decode its waiting list
        w["queue"] = w.get("queue_depth", w.get("prefill_queue", 0))
    return render(request, "console/overview.html", {"tenants": tenants, "workers": workers})
