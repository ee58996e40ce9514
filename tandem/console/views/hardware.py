"""Hardware (operators): every compute pool with its live workers, create and edit
pools."""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import Http404
from django.shortcuts import redirect

from tenants import services
from tenants.models import ComputePool

from .. import selectors
from ..forms import PoolCreateForm, PoolEditForm, apply_errors
from .base import actor, operator_page, render_page


@operator_page(methods=("GET",))
def hardware(request):
    return render_page(request, "console/hardware.html",
                       {"pools": selectors.pools_overview(), "mine": set(), "show_tenants": True,
                        "outside": selectors.workers_outside_pools(), "cpu_workers": selectors.cpu_workers()},
                       nav="hardware")


@operator_page(methods=("GET",))
def hardware_live(request):
    return render_page(request, "console/partials/pools.html",
                       {"pools": selectors.pools_overview(), "mine": set(), "show_tenants": True,
                        "outside": selectors.workers_outside_pools(), "cpu_workers": selectors.cpu_workers()})


@operator_page()
def pool_create(request):
    form = PoolCreateForm(request.POST or None, initial={"device": "cpu", "max_batch": 64})
    if request.method == "POST" and form.is_valid():
        try:
            pool = services.pool_create(actor=actor(request), **form.cleaned_data)
        except ValidationError as exc:
            apply_errors(form, exc)
        else:
            messages.success(request, f"Saved: pool {pool.queue} created. Start workers with "
                                      f"TANDEM_ROLE={pool.role} TANDEM_POOL={pool.slug}.")
            return redirect("console:hardware")
    return render_page(request, "console/pool_form.html", {"form": form, "pool": None}, nav="hardware",
                       status=400 if form.errors else 200)


@operator_page()
def pool_edit(request, pool_id):
    pool = ComputePool.objects.filter(pk=pool_id).first()
    if pool is None:
        raise Http404("No such pool.")
    initial = {"device": pool.device, "dedicated": pool.dedicated, "max_batch": pool.max_batch,
               "description": pool.description}
    form = PoolEditForm(request.POST or None, initial=initial)
    if request.method == "POST" and form.is_valid():
        try:
            services.pool_update(pool=pool, actor=actor(request), **form.cleaned_data)
        except ValidationError as exc:
            apply_errors(form, exc)
        else:
            messages.success(request, f"Saved pool {pool.queue}.")
            return redirect("console:hardware")
    return render_page(request, "console/pool_form.html", {"form": form, "pool": pool}, nav="hardware",
                       status=400 if form.errors else 200)
